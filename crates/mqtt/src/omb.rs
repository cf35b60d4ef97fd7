//! OpenMessaging Benchmark MQTT driver files, read unchanged. OMB has two:
//!
//! - `driver-mqtt` (`io.openmessaging.benchmark.driver.mqtt.MQTTBenchmarkDriver`, Paho, MQTT
//!   3.1.1): `brokerAddr`, `userName`, `password`, `cleanSession`, `keepAliveInterval`,
//!   `maxInflight`, `clientIdPrefix`, `pubQos`, `subQos`, all at the top;
//! - `driver-mqtt5` (`io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver`, HiveMQ's
//!   client, MQTT 5): `client: {serverUri, username, password, qos, topicPrefix}` and
//!   `consumer: {cleanSession, sessionExpiryInterval, receiveMaximum}`; its consumers share
//!   a subscription (`$share/<subscription>/<topic>`), as brokerbench's do when a subscription
//!   has several members.

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::check_driver_keys;
use brokerbench_model::spec::did_you_mean;
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

use crate::url::MqttUrl;

/// OMB's MQTT 3.1.1 driver class.
pub const OMB_V3_CLASS: &str = "io.openmessaging.benchmark.driver.mqtt.MQTTBenchmarkDriver";
/// OMB's MQTT 5 driver class.
pub const OMB_V5_CLASS: &str = "io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver";

/// Every top-level field of either OMB MQTT driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &[
    "name",
    "driverClass",
    "brokerAddr",
    "userName",
    "password",
    "cleanSession",
    "keepAliveInterval",
    "maxInflight",
    "clientIdPrefix",
    "pubQos",
    "subQos",
    "client",
    "consumer",
];

const V5_CLIENT_FIELDS: &[&str] = &["serverUri", "username", "password", "qos", "topicPrefix"];
const V5_CONSUMER_FIELDS: &[&str] = &[
    "cleanSession",
    "sessionExpiryInterval",
    "sessionExpiryIntervalSeconds",
    "receiveMaximum",
];

/// Translates an OMB MQTT driver file into brokerbench's MQTT driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let class = value
        .get("driverClass")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("mqtt"));
    let notes = if class == OMB_V5_CLASS {
        translate_v5(file, value, &mut out)?
    } else {
        translate_v3(file, value, &mut out)?
    };
    Ok(OmbDriver {
        map: Value::Object(out),
        notes,
    })
}

/// A string (or number as text) at `key` of `map`; `field` names it in errors.
fn text(file: &str, map: &Value, key: &str, field: &str) -> Result<Option<String>, SpecError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(SpecError::field(file, field, "must be a string")),
    }
}

fn number(file: &str, map: &Value, key: &str, field: &str) -> Result<Option<u64>, SpecError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| SpecError::field(file, field, "must be a whole number")),
    }
}

fn boolean(file: &str, map: &Value, key: &str, field: &str) -> Result<Option<bool>, SpecError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(SpecError::field(file, field, "must be true or false")),
    }
}

fn qos(file: &str, map: &Value, key: &str, field: &str) -> Result<Option<u64>, SpecError> {
    match number(file, map, key, field)? {
        Some(q) if q > 2 => Err(SpecError::field(file, field, "must be 0, 1 or 2")),
        q => Ok(q),
    }
}

/// The broker's URL with the file's login, as the driver mapping carries it.
fn url(
    file: &str,
    address: Option<String>,
    field: &str,
    login: (Option<String>, Option<String>),
) -> Result<MqttUrl, SpecError> {
    let address = address.unwrap_or_else(|| "tcp://127.0.0.1:1883".into());
    let url = MqttUrl::parse(&address).map_err(|e| SpecError::field(file, field, e))?;
    // A login in the URL itself stands unless the file gives one.
    if login.0.is_none() && login.1.is_none() {
        return Ok(url);
    }
    Ok(url.with_login(login.0, login.1))
}

fn translate_v3(file: &str, value: &Value, out: &mut Mapping) -> Result<Vec<String>, SpecError> {
    let login = (
        text(file, value, "userName", "userName")?,
        text(file, value, "password", "password")?,
    );
    let url = url(
        file,
        text(file, value, "brokerAddr", "brokerAddr")?,
        "brokerAddr",
        login,
    )?;
    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark MQTT 3.1.1 driver file (Paho): brokerbench speaks MQTT 3.1.1 to {url} with its own client (the managed mosquitto listens on 1883 unless BROKERBENCH_MQTT_PORT moves it: `brokerbench broker up mqtt` starts it)"
    )];
    out.insert("mqtt_url".into(), Value::from(url.with_secret()));
    out.insert("protocol".into(), Value::from("3.1.1"));
    if let Some(q) = qos(file, value, "pubQos", "pubQos")? {
        out.insert("qos".into(), Value::from(q));
    }
    if let Some(q) = qos(file, value, "subQos", "subQos")? {
        out.insert("subscribe_qos".into(), Value::from(q));
    }
    if let Some(clean) = boolean(file, value, "cleanSession", "cleanSession")? {
        out.insert("clean_session".into(), Value::from(clean));
    }
    if let Some(n) = number(file, value, "maxInflight", "maxInflight")? {
        out.insert("max_outstanding".into(), Value::from(n.clamp(1, 65_535)));
    }
    if let Some(s) = number(file, value, "keepAliveInterval", "keepAliveInterval")? {
        if s > 65_535 {
            notes.push(format!("keepAliveInterval: {s} s is more than MQTT's 65535: the run keeps connections alive every 65535 s"));
        }
        out.insert("keep_alive_seconds".into(), Value::from(s.min(65_535)));
    }
    if value.get("clientIdPrefix").is_some() {
        notes.push("clientIdPrefix: ignored (brokerbench names each client after the run, the shard and its producer or consumer)".into());
    }
    Ok(notes)
}

/// Checks the keys of the nested mapping `section` against `fields`.
fn check_section(
    file: &str,
    value: &Value,
    section: &str,
    fields: &[&str],
) -> Result<(), SpecError> {
    let Some(map) = value.get(section) else {
        return Ok(());
    };
    let Some(map) = map.as_object() else {
        return Err(SpecError::field(file, section, "must be a mapping"));
    };
    match map.keys().find(|k| !fields.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(SpecError::field(
            file,
            &format!("{section}.{key}"),
            format!(
                "unknown field of this OpenMessaging Benchmark driver file{} (OMB would ignore it; brokerbench stops)",
                did_you_mean(key, fields)
            ),
        )),
    }
}

fn translate_v5(file: &str, value: &Value, out: &mut Mapping) -> Result<Vec<String>, SpecError> {
    check_section(file, value, "client", V5_CLIENT_FIELDS)?;
    check_section(file, value, "consumer", V5_CONSUMER_FIELDS)?;
    let empty = Value::Object(Mapping::new());
    let client = value.get("client").unwrap_or(&empty);
    let consumer = value.get("consumer").unwrap_or(&empty);
    let login = (
        text(file, client, "username", "client.username")?,
        text(file, client, "password", "client.password")?,
    );
    let address = text(file, client, "serverUri", "client.serverUri")?;
    let url = url(file, address, "client.serverUri", login)?;
    let notes = vec![format!(
        "{file} is an OpenMessaging Benchmark MQTT 5 driver file: brokerbench speaks MQTT 5 to {url} with its own client, a subscription with several consumers shared among them ($share/…) as OMB's is (the managed mosquitto listens on 1883 unless BROKERBENCH_MQTT_PORT moves it)"
    )];
    out.insert("mqtt_url".into(), Value::from(url.with_secret()));
    out.insert("protocol".into(), Value::from("5"));
    // OMB's defaults where the file is silent: QoS 1, a clean session, 256 in flight.
    let q = qos(file, client, "qos", "client.qos")?.unwrap_or(1);
    out.insert("qos".into(), Value::from(q));
    if let Some(prefix) = text(file, client, "topicPrefix", "client.topicPrefix")? {
        out.insert("topic_prefix".into(), Value::from(prefix));
    }
    let clean = boolean(file, consumer, "cleanSession", "consumer.cleanSession")?.unwrap_or(true);
    out.insert("clean_session".into(), Value::from(clean));
    let expiry = match number(
        file,
        consumer,
        "sessionExpiryInterval",
        "consumer.sessionExpiryInterval",
    )? {
        Some(s) => Some(s),
        None => number(
            file,
            consumer,
            "sessionExpiryIntervalSeconds",
            "consumer.sessionExpiryIntervalSeconds",
        )?,
    };
    if let Some(s) = expiry {
        out.insert(
            "session_expiry_seconds".into(),
            Value::from(s.min(u32::MAX as u64)),
        );
    }
    let receive =
        number(file, consumer, "receiveMaximum", "consumer.receiveMaximum")?.unwrap_or(256);
    if receive == 0 || receive > 65_535 {
        return Err(SpecError::field(
            file,
            "consumer.receiveMaximum",
            "must be 1 to 65535",
        ));
    }
    out.insert("receive_maximum".into(), Value::from(receive));
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("m.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    #[test]
    fn omb_mqtt_3_driver_file_reads_as_paho_would() {
        let d = omb("name: MQTT\ndriverClass: io.openmessaging.benchmark.driver.mqtt.MQTTBenchmarkDriver\n\n# MQTT client-specific configuration\n\nbrokerAddr: tcp://127.0.0.1:1883\nuserName: 00000000000000000000000002\npassword: 00000000000000000000000002\ncleanSession: false\nkeepAliveInterval: 6000000\nmaxInflight: 65535\nclientIdPrefix: GID-MQTT@@@Client\npubQos: 0\nsubQos: 1\n").unwrap();
        assert_eq!(d.map["driver"], "mqtt");
        assert_eq!(d.map["protocol"], "3.1.1");
        assert_eq!(
            d.map["mqtt_url"],
            "mqtt://00000000000000000000000002:00000000000000000000000002@127.0.0.1:1883"
        );
        assert_eq!(
            (d.map["qos"].as_u64(), d.map["subscribe_qos"].as_u64()),
            (Some(0), Some(1))
        );
        assert_eq!(d.map["keep_alive_seconds"], 65_535);
        assert_eq!(d.map["clean_session"], false);
        // The user and password are the same here: the user is shown, the password is not.
        let notes = format!("{:?}", d.notes);
        assert!(notes.contains(":***@") && !notes.contains("2:0"), "{notes}");
    }

    #[test]
    fn omb_mqtt_5_driver_file_reads_its_sections() {
        let d = omb("name: MQTT5\ndriverClass: io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver\nclient:\n  serverUri: tcp://localhost:1883\n  username: ''\n  password: ''\n  qos: 2\n  topicPrefix: benchmark\nconsumer:\n  cleanSession: false\n  sessionExpiryInterval: 259200\n  receiveMaximum: 100\n").unwrap();
        assert_eq!(d.map["protocol"], "5");
        assert_eq!(d.map["mqtt_url"], "mqtt://localhost:1883");
        assert_eq!(
            (d.map["qos"].as_u64(), d.map["receive_maximum"].as_u64()),
            (Some(2), Some(100))
        );
        assert_eq!(d.map["session_expiry_seconds"], 259_200);
        assert_eq!(d.map["topic_prefix"], "benchmark");
        let e = omb("driverClass: io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver\nclient: {serverUrl: tcp://h:1}\n").unwrap_err().to_string();
        assert!(
            e.contains("`client.serverUrl`") && e.contains("did you mean `serverUri`"),
            "{e}"
        );
        let e = omb("driverClass: io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver\nclient: {qos: 3}\n").unwrap_err().to_string();
        assert!(e.contains("`client.qos`"), "{e}");
    }
}
