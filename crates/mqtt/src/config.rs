//! The MQTT driver file.

use serde::{Deserialize, Serialize};

pub use crate::packet::Version;
pub use crate::url::MqttUrl;

/// Top-level MQTT driver field names, for `--set` routing and did-you-mean.
pub const MQTT_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "mqtt_url",
    "tls",
    "protocol",
    "qos",
    "subscribe_qos",
    "max_outstanding",
    "receive_maximum",
    "topic_prefix",
    "clean_session",
    "session_expiry_seconds",
    "message_expiry_seconds",
    "keep_alive_seconds",
    "reconnect",
];

fn default_version() -> Version {
    Version::V5
}
fn default_qos() -> u8 {
    1
}
fn default_outstanding() -> u32 {
    1000
}
fn default_receive_maximum() -> u16 {
    256
}
fn default_prefix() -> String {
    "brokerbench".into()
}
fn default_true() -> bool {
    true
}
fn default_session_expiry() -> u32 {
    300
}
fn default_keep_alive() -> u16 {
    60
}

/// MQTT, driven by brokerbench's own client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttDriverConfig {
    /// `mqtt://[user:password@]host:port` (`mqtts://` for TLS; Paho's `tcp://` and `ssl://`
    /// too); absent means the managed local mosquitto.
    #[serde(default)]
    pub mqtt_url: Option<MqttUrl>,
    /// TLS to the broker (`mqtts://` turns it on too): `ca_file`, a client certificate,
    /// `server_name`.
    #[serde(default)]
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
    /// `"5"` or `"3.1.1"`.
    #[serde(default = "default_version")]
    pub protocol: Version,
    /// QoS of every PUBLISH: 0 (at most once, unconfirmed), 1 (PUBACK), 2 (PUBREC, PUBREL,
    /// PUBCOMP).
    #[serde(default = "default_qos")]
    pub qos: u8,
    /// QoS of the subscriptions (a message arrives at the lower of the two); absent: `qos`.
    #[serde(default)]
    pub subscribe_qos: Option<u8>,
    /// QoS 1 and 2 PUBLISHes per producer in flight at most (and no more than the broker's
    /// receive maximum).
    #[serde(default = "default_outstanding")]
    pub max_outstanding: u32,
    /// MQTT 5: QoS 1 and 2 messages the broker may have in flight to one consumer.
    #[serde(default = "default_receive_maximum")]
    pub receive_maximum: u16,
    /// Topic names start with this level.
    #[serde(default = "default_prefix")]
    pub topic_prefix: String,
    /// Consumers start a new session and the broker forgets it when they go; `false`: a
    /// persistent session (kept `session_expiry_seconds` in MQTT 5), whose QoS 1 and 2
    /// messages wait for a consumer that reconnects.
    #[serde(default = "default_true")]
    pub clean_session: bool,
    /// MQTT 5, with `clean_session: false`: how long the broker keeps a session after its
    /// connection ends.
    #[serde(default = "default_session_expiry")]
    pub session_expiry_seconds: u32,
    /// MQTT 5: the broker discards a message not delivered within this many seconds
    /// (counted as dropped by the broker's policy).
    #[serde(default)]
    pub message_expiry_seconds: Option<u32>,
    /// Each connection's keep-alive: a PINGREQ after this long without traffic (half of it).
    #[serde(default = "default_keep_alive")]
    pub keep_alive_seconds: u16,
    /// After a lost connection, producers and consumers connect again with backoff and go on
    /// (a persistent session gets what was queued for it meanwhile); `reconnect: false`
    /// leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
}

impl Default for MqttDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

impl MqttDriverConfig {
    /// The QoS of the subscriptions.
    pub fn subscription_qos(&self) -> u8 {
        self.subscribe_qos.unwrap_or(self.qos)
    }

    /// Checks serde cannot make, each naming the field and the fix.
    pub fn validate(&self) -> Result<(), brokerbench_model::workload::FieldError> {
        use brokerbench_model::workload::FieldError;
        let fail = |field: &'static str, why: String| Err(FieldError::new(field, why));
        let level_ok = !self.topic_prefix.is_empty()
            && !self.topic_prefix.contains(['+', '#', '\0'])
            && !self.topic_prefix.starts_with('$');
        if !level_ok {
            return fail(
                "topic_prefix",
                format!(
                    "'{}' cannot start topic names: no + # or $ at its start, and not empty",
                    self.topic_prefix
                ),
            );
        }
        for (field, qos) in [
            ("qos", Some(self.qos)),
            ("subscribe_qos", self.subscribe_qos),
        ] {
            if qos.is_some_and(|q| q > 2) {
                return fail(field, "must be 0, 1 or 2".into());
            }
        }
        if self.max_outstanding == 0 || self.max_outstanding > 65_535 {
            return fail(
                "max_outstanding",
                "must be 1 to 65535 (MQTT's packet identifiers)".into(),
            );
        }
        if self.receive_maximum == 0 {
            return fail("receive_maximum", "must be at least 1".into());
        }
        if self.message_expiry_seconds == Some(0) {
            return fail(
                "message_expiry_seconds",
                "0 would expire every message at once: give seconds (e.g. 60), or leave it out"
                    .into(),
            );
        }
        if self.protocol == Version::V311 && self.message_expiry_seconds.is_some() {
            return fail("message_expiry_seconds", "message expiry is MQTT 5: set protocol: \"5\", or leave message_expiry_seconds out".into());
        }
        if self.keep_alive_seconds == 0 {
            return fail("keep_alive_seconds", "0 turns keep-alive off, which brokers may refuse (mosquitto 2.0.12 and later do for MQTT 3.1.1): give seconds, e.g. 60".into());
        }
        if !self.clean_session && self.session_expiry_seconds == 0 && self.protocol == Version::V5 {
            return fail("session_expiry_seconds", "0 ends a persistent session with its connection (MQTT 5): give seconds (e.g. 300), or clean_session: true".into());
        }
        if self.tls.is_some() && self.mqtt_url.is_none() {
            return fail(
                "tls",
                "the tls: block is for a broker named by mqtt_url: write mqtt_url: mqtts://host:port".into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> MqttDriverConfig {
        brokerbench_model::yaml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_and_checks() {
        let c = MqttDriverConfig::default();
        assert_eq!(
            (c.protocol, c.qos, c.subscription_qos()),
            (Version::V5, 1, 1)
        );
        assert!(c.clean_session && c.mqtt_url.is_none());
        assert!(c.validate().is_ok());
        assert_eq!(parsed("protocol: '3.1.1'").protocol, Version::V311);
        assert_eq!(parsed("qos: 3").validate().unwrap_err().field, "qos");
        assert_eq!(
            parsed("protocol: '3.1.1'\nmessage_expiry_seconds: 5")
                .validate()
                .unwrap_err()
                .field,
            "message_expiry_seconds"
        );
        assert_eq!(
            parsed("topic_prefix: a/#").validate().unwrap_err().field,
            "topic_prefix"
        );
        assert_eq!(parsed("qos: 2\nsubscribe_qos: 0").subscription_qos(), 0);
    }
}
