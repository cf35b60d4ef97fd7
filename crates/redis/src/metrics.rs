//! The server's own figures: INFO (every section), read over RESP once a scrape and written as
//! Prometheus text (`redis_<field>`, and `redis_cmdstat_calls{cmd="xadd"}` per command) over
//! one connection kept from scrape to scrape, and
//! what each figure means (docs/src/broker-metrics.md).

use std::sync::Mutex;

use brokerbench_metrics::{
    counter, gauge, Auth, Endpoint, Format, MetricSet, MetricSpec, Reader, MESSAGES_IN,
};

use crate::config::RedisUrl;
use crate::conn::{Conn, ConnectError};

/// Calls of the command `cmd` (INFO commandstats) per second; none before its first call.
const fn calls(key: &'static str, cmd: &'static str) -> MetricSpec {
    MetricSpec {
        label: Some(("cmd", cmd)),
        absent_is_zero: true,
        ..counter(key, "redis_cmdstat_calls", None)
    }
}

/// The count compared with brokerbench's is the server's XADD calls: one per message sent
/// (from every client of the server; failed calls included, refused ones not).
const SPECS: &[MetricSpec] = &[
    calls(MESSAGES_IN, "xadd"),
    calls("stream_reads_per_second", "xreadgroup"),
    calls("stream_acknowledgement_commands_per_second", "xack"),
    counter(
        "commands_per_second",
        "redis_total_commands_processed",
        None,
    ),
    counter(
        "network_received_bytes_per_second",
        "redis_total_net_input_bytes",
        None,
    ),
    counter(
        "network_sent_bytes_per_second",
        "redis_total_net_output_bytes",
        None,
    ),
    counter("cpu_user_ratio", "redis_used_cpu_user", None),
    counter("cpu_system_ratio", "redis_used_cpu_sys", None),
    gauge("used_memory_bytes", "redis_used_memory", None, 1.0),
    gauge("aof_size_bytes", "redis_aof_current_size", None, 1.0),
    gauge("connected_clients", "redis_connected_clients", None, 1.0),
    gauge("blocked_clients", "redis_blocked_clients", None, 1.0),
];

/// Redis's metric set: INFO, at `redis://host:port` (or `rediss://`).
pub static METRICS: MetricSet = MetricSet {
    source: "redis",
    format: Format::Text {
        marker: "redis_",
        schemes: &["redis", "rediss"],
        read: Reader {
            name: "redis INFO",
            read: read_info,
        },
    },
    specs: SPECS,
};

/// The connection scrapes go over, kept from one to the next (with the URL it is to).
static CONNECTION: Mutex<Option<(String, Conn)>> = Mutex::new(None);

/// INFO of the server at `endpoint`, as Prometheus text, over the kept connection (a new
/// one when there is none, or the last failed).
fn read_info(endpoint: &Endpoint) -> Result<String, String> {
    let mut kept = CONNECTION.lock().unwrap_or_else(|e| e.into_inner());
    let timeout = endpoint.request_timeout();
    let mut conn = match kept.take() {
        Some((url, conn)) if url == endpoint.url() => conn,
        _ => connect(endpoint)?,
    };
    let info = conn.call(&[b"INFO", b"all"], timeout)?;
    *kept = Some((endpoint.url().to_string(), conn));
    Ok(prometheus_text(&info.text().unwrap_or_default()))
}

/// A connection to the server at `endpoint`, logged in as its credentials say (a user
/// without a password, `x@host`, is Redis's password of the default user).
fn connect(endpoint: &Endpoint) -> Result<Conn, String> {
    let mut url = RedisUrl::parse(endpoint.url())?;
    if let Auth::Basic { username, password } = endpoint.auth() {
        url = match (username.as_str(), password.as_str()) {
            (password, "") => url.with_login(None, Some(password.to_string())),
            ("" | "default", password) => url.with_login(None, Some(password.to_string())),
            (user, password) => url.with_login(Some(user.to_string()), Some(password.to_string())),
        };
    }
    if url.tls.is_some() {
        url.tls = Some(brokerbench_driver::tls::TlsSettings {
            ca_file: endpoint.ca().map(|p| p.to_path_buf()),
            ..Default::default()
        });
    }
    Conn::connect(&url, endpoint.request_timeout()).map_err(|e| match e {
        ConnectError::Unreachable(why)
        | ConnectError::Authentication(why)
        | ConnectError::Tls(why)
        | ConnectError::Protocol(why) => why,
    })
}

/// INFO's `field:value` lines as Prometheus samples: each number as `redis_<field>`, each
/// command's counts (`cmdstat_xadd:calls=3,usec=…,failed_calls=0`) as
/// `redis_cmdstat_<count>{cmd="xadd"}`.
pub fn prometheus_text(info: &str) -> String {
    let mut out = String::new();
    for line in info.lines() {
        let Some((field, value)) = line.trim().split_once(':') else {
            continue;
        };
        if let Some(cmd) = field.strip_prefix("cmdstat_") {
            for (count, n) in value.split(',').filter_map(|kv| kv.split_once('=')) {
                if n.parse::<f64>().is_ok() {
                    out += &format!("redis_cmdstat_{count}{{cmd=\"{cmd}\"}} {n}\n");
                }
            }
        } else if value.parse::<f64>().is_ok() && is_name(field) {
            out += &format!("redis_{field} {value}\n");
        }
    }
    out
}

/// Whether `field` may be part of a Prometheus name.
fn is_name(field: &str) -> bool {
    !field.is_empty() && field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_becomes_samples_and_the_specs_find_them() {
        let info = "# Stats\r\ntotal_commands_processed:12\r\nused_memory:1024\r\nrole:master\r\n# Commandstats\r\ncmdstat_xadd:calls=7,usec=40,usec_per_call=5.71,rejected_calls=0,failed_calls=1\r\n";
        let text = prometheus_text(info);
        assert!(
            text.contains("redis_total_commands_processed 12\n"),
            "{text}"
        );
        assert!(
            text.contains("redis_cmdstat_calls{cmd=\"xadd\"} 7\n"),
            "{text}"
        );
        assert!(!text.contains("role"), "{text}");
        let samples = brokerbench_metrics::parse(&text);
        let xadd = samples
            .iter()
            .find(|s| s.name == "redis_cmdstat_calls")
            .unwrap();
        assert_eq!(xadd.value, 7.0);
        for spec in SPECS {
            assert!(
                brokerbench_metrics::follows_naming(spec.key),
                "{}",
                spec.key
            );
        }
    }
}
