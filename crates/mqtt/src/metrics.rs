//! The broker's own figures: mosquitto's `$SYS/#` topics (published every `sys_interval`
//! seconds; the managed broker's is 1, which mosquitto 2.0.11 makes every 2 s), read by one client subscribed to them and kept from
//! scrape to scrape, each scrape written as Prometheus text (`$SYS/broker/clients/connected`
//! becomes `mqtt_broker_clients_connected`); what each figure means is in
//! docs/src/broker-metrics.md.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use brokerbench_metrics::{
    counter, gauge, Auth, Endpoint, Format, MetricSet, MetricSpec, Reader, MESSAGES_IN,
};

use crate::conn::{Conn, ConnectError, Session};
use crate::packet::{self, Version};
use crate::url::MqttUrl;

/// The count compared with brokerbench's is the PUBLISH packets the broker received, from
/// every client (`$SYS/broker/publish/messages/received`).
const SPECS: &[MetricSpec] = &[
    counter(MESSAGES_IN, "mqtt_broker_publish_messages_received", None),
    counter(
        "messages_out_per_second",
        "mqtt_broker_publish_messages_sent",
        None,
    ),
    counter(
        "messages_dropped_per_second",
        "mqtt_broker_publish_messages_dropped",
        None,
    ),
    counter(
        "network_received_bytes_per_second",
        "mqtt_broker_bytes_received",
        None,
    ),
    counter(
        "network_sent_bytes_per_second",
        "mqtt_broker_bytes_sent",
        None,
    ),
    gauge(
        "connected_clients",
        "mqtt_broker_clients_connected",
        None,
        1.0,
    ),
    gauge(
        "stored_messages",
        "mqtt_broker_store_messages_count",
        None,
        1.0,
    ),
    gauge(
        "stored_message_bytes",
        "mqtt_broker_store_messages_bytes",
        None,
        1.0,
    ),
    gauge("heap_bytes", "mqtt_broker_heap_current", None, 1.0),
    gauge(
        "subscriptions",
        "mqtt_broker_subscriptions_count",
        None,
        1.0,
    ),
];

/// MQTT's metric set: `$SYS/#`, at `mqtt://host:port` (or `mqtts://`).
pub static METRICS: MetricSet = MetricSet {
    source: "mqtt",
    format: Format::Text {
        marker: "mqtt_broker_",
        schemes: &["mqtt", "mqtts", "tcp", "ssl"],
        read: Reader {
            name: "MQTT $SYS",
            read: read_sys,
        },
    },
    specs: SPECS,
};

/// The subscribed client, the URL it is to, and the last value of each `$SYS` topic.
struct Watcher {
    url: String,
    conn: Conn,
    values: BTreeMap<String, String>,
}

static WATCHER: Mutex<Option<Watcher>> = Mutex::new(None);

/// How long a scrape waits for the broker's next `$SYS` update at most: mosquitto 2.0.11 with
/// `sys_interval 1` (the managed broker's) publishes one every 2 s (measured); one with a
/// longer interval is read as it last said.
const FRESH_WITHIN: Duration = Duration::from_millis(2500);

/// Once the update has begun, how long a quiet connection means it is over.
const UPDATE_OVER: Duration = Duration::from_millis(20);

/// The `$SYS` topic every update publishes (it changes every second).
const UPTIME: &[u8] = b"$SYS/broker/uptime";

/// The broker's `$SYS` values at `endpoint` as Prometheus text, from its first update after
/// the scrape began (so that the counts before and after a run hold everything until then).
fn read_sys(endpoint: &Endpoint) -> Result<String, String> {
    let mut kept = WATCHER.lock().unwrap_or_else(|e| e.into_inner());
    let mut watcher = match kept.take() {
        Some(w) if w.url == endpoint.url() => w,
        _ => subscribe(endpoint)?,
    };
    take_update(&mut watcher, FRESH_WITHIN.min(endpoint.request_timeout()))?;
    let text = prometheus_text(&watcher.values);
    *kept = Some(watcher);
    Ok(text)
}

/// A client subscribed to `$SYS/#` at the broker at `endpoint`, with its first values.
fn subscribe(endpoint: &Endpoint) -> Result<Watcher, String> {
    let mut url = MqttUrl::parse(endpoint.url())?;
    if let Auth::Basic { username, password } = endpoint.auth() {
        url = url.with_login(Some(username.clone()), Some(password.clone()));
    }
    if url.tls.is_some() {
        url.tls = Some(brokerbench_driver::tls::TlsSettings {
            ca_file: endpoint.ca().map(|p| p.to_path_buf()),
            ..Default::default()
        });
    }
    let session = Session {
        version: Version::V311,
        client_id: format!("brokerbench-metrics-{}", std::process::id()),
        clean: true,
        keep_alive_s: 60,
        session_expiry_s: None,
        receive_maximum: None,
    };
    let timeout = endpoint.request_timeout();
    let mut conn = Conn::connect(&url, &session, timeout).map_err(|e| match e {
        ConnectError::Unreachable(why)
        | ConnectError::Authentication(why)
        | ConnectError::Tls(why)
        | ConnectError::Protocol(why) => why,
    })?;
    let granted = conn.subscribe(&["$SYS/#".to_string()], 0, timeout)?;
    if granted.first().is_none_or(|&g| g >= 0x80) {
        return Err("the broker refused a subscription to $SYS/#".into());
    }
    Ok(Watcher {
        url: endpoint.url().to_string(),
        conn,
        values: BTreeMap::new(),
    })
}

/// Reads the `$SYS` messages that arrive until the next update is over (or `within` passes):
/// what already waited in the socket first, as the values before it.
fn take_update(watcher: &mut Watcher, within: Duration) -> Result<(), String> {
    let give_up = Instant::now() + within;
    while read_values(watcher, Duration::ZERO)?.0 > 0 {
        if Instant::now() >= give_up {
            return Ok(());
        }
    }
    let mut over_at: Option<Instant> = None;
    loop {
        let deadline = over_at.unwrap_or(give_up).min(give_up);
        let left = deadline.saturating_duration_since(Instant::now());
        let (read, updated) = read_values(watcher, left)?;
        if updated || (over_at.is_some() && read > 0) {
            over_at = Some(Instant::now() + UPDATE_OVER);
        }
        let now = Instant::now();
        if now >= give_up || (read == 0 && now >= deadline) {
            return Ok(());
        }
    }
}

/// One poll of the watcher: how many messages it read, and whether one was a new update's
/// uptime.
fn read_values(watcher: &mut Watcher, wait: Duration) -> Result<(usize, bool), String> {
    read_sys_values(&mut watcher.conn, &mut watcher.values, UPTIME, wait)
}

/// One poll of a connection subscribed to `$SYS` topics, waiting up to `wait` for the first
/// message, each value kept in `values` by its topic: how many messages it read, and whether
/// one was a new update of topic `update` (not the retained value of the last one).
pub(crate) fn read_sys_values(
    conn: &mut Conn,
    values: &mut BTreeMap<String, String>,
    update: &[u8],
    wait: Duration,
) -> Result<(usize, bool), String> {
    let version = conn.version;
    let mut updated = false;
    let read = conn.poll(wait, &mut |p, _| {
        if p.kind == packet::PUBLISH {
            let m = packet::parse_publish(version, p.flags, p.body).map_err(|e| e.0)?;
            // Retained values are the last update's, sent at once to a new subscription.
            updated |= m.topic == update && p.flags & 0x01 == 0;
            values.insert(
                String::from_utf8_lossy(m.topic).into_owned(),
                String::from_utf8_lossy(m.payload).into_owned(),
            );
        }
        Ok(())
    })?;
    Ok((read, updated))
}

/// Each numeric `$SYS` value as a Prometheus sample: the topic's levels joined by `_`
/// (`$SYS/broker/load/messages/received/1min` → `mqtt_broker_load_messages_received_1min`),
/// the value's first word (`12 seconds` → 12).
pub fn prometheus_text(values: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (topic, value) in values {
        let Some(path) = topic.strip_prefix("$SYS/") else {
            continue;
        };
        let name: String = path
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let number = value.split_whitespace().next().unwrap_or_default();
        if number.parse::<f64>().is_ok() {
            out += &format!("mqtt_{name} {number}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sys_topics_become_samples_and_the_specs_find_them() {
        let values: BTreeMap<String, String> = [
            ("$SYS/broker/publish/messages/received", "7"),
            ("$SYS/broker/uptime", "12 seconds"),
            ("$SYS/broker/version", "mosquitto version 2.0.11"),
            ("$SYS/broker/load/messages/received/1min", "3.5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let text = prometheus_text(&values);
        assert!(
            text.contains("mqtt_broker_publish_messages_received 7\n"),
            "{text}"
        );
        assert!(text.contains("mqtt_broker_uptime 12\n"), "{text}");
        assert!(
            text.contains("mqtt_broker_load_messages_received_1min 3.5\n"),
            "{text}"
        );
        assert!(!text.contains("version"), "{text}");
        let samples = brokerbench_metrics::parse(&text);
        assert!(samples
            .iter()
            .any(|s| s.name == SPECS[0].metric && s.value == 7.0));
        for spec in SPECS {
            assert!(
                brokerbench_metrics::follows_naming(spec.key),
                "{}",
                spec.key
            );
        }
    }
}
