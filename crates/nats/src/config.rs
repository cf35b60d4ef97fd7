//! The NATS driver file.

use brokerbench_driver::url::{Alone, BrokerUrl, Scheme};
use serde::{Deserialize, Serialize};

/// Top-level NATS driver field names, for `--set` routing and did-you-mean.
pub const NATS_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "servers",
    "storage",
    "replicas",
    "ack_policy",
    "max_msgs",
    "max_bytes",
    "discard",
    "duplicate_window",
    "msg_id",
    "max_outstanding",
    "pull_batch",
    "max_ack_pending",
    "stream_prefix",
    "delete_streams",
    "reconnect",
    "tls",
];

fn default_one() -> u32 {
    1
}
fn default_true() -> bool {
    true
}
fn default_outstanding() -> u32 {
    1000
}
fn default_batch() -> u32 {
    500
}
fn default_ack_pending() -> u32 {
    10_000
}
fn default_prefix() -> String {
    "brokerbench".into()
}

/// NATS JetStream, driven through brokerbench's own NATS client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsDriverConfig {
    /// `nats://[user:password@]host:port`; absent means the managed local nats-server.
    #[serde(default)]
    pub servers: Option<NatsUrl>,
    #[serde(default)]
    pub storage: Storage,
    #[serde(default = "default_one")]
    pub replicas: u32,
    #[serde(default)]
    pub ack_policy: AckPolicy,
    /// Stream limit in messages.
    #[serde(default)]
    pub max_msgs: Option<u64>,
    /// Stream limit in bytes (units such as 64MiB allowed).
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub discard: Discard,
    /// Dedup window for `Nats-Msg-Id`, e.g. `2m`.
    #[serde(default, deserialize_with = "optional_duration")]
    pub duplicate_window: Option<u64>,
    /// Send `Nats-Msg-Id: <producer>:<sequence>` with every message.
    #[serde(default)]
    pub msg_id: bool,
    #[serde(default = "default_outstanding")]
    pub max_outstanding: u32,
    #[serde(default = "default_batch")]
    pub pull_batch: u32,
    #[serde(default = "default_ack_pending")]
    pub max_ack_pending: u32,
    #[serde(default = "default_prefix")]
    pub stream_prefix: String,
    #[serde(default = "default_true")]
    pub delete_streams: bool,
    /// After a lost connection, producers and consumers connect again with backoff and go
    /// on (streams and durable consumers with file storage survive a server restart; memory
    /// ones do not, and are not made again); `reconnect: false` leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
    /// TLS: `{ca_file, cert_file, key_file, server_name}` (PEM files); given, the connection
    /// goes over to TLS after the server's INFO, as with a `tls://` URL.
    #[serde(default)]
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
}

impl Default for NatsDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Storage {
    #[default]
    File,
    Memory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckPolicy {
    /// Each delivery is acknowledged; unacknowledged ones are redelivered after ack_wait.
    #[default]
    Explicit,
    /// The server forgets a delivery once sent.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Discard {
    /// At a limit the oldest messages go (reported as dropped by the broker).
    #[default]
    Old,
    /// At a limit new messages are refused (each refusal a failed publish).
    New,
}

impl NatsDriverConfig {
    /// Checks serde cannot make, each naming the field and the fix.
    pub fn validate(&self) -> Result<(), brokerbench_model::workload::FieldError> {
        use brokerbench_model::workload::FieldError;
        let name_ok = !self.stream_prefix.is_empty()
            && self
                .stream_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(FieldError::new(
                "stream_prefix",
                format!(
                    "'{}' cannot start stream names: use letters, digits, - and _ only (NATS subjects split at dots)",
                    self.stream_prefix
                ),
            ));
        }
        for (field, value) in [
            ("replicas", self.replicas),
            ("max_outstanding", self.max_outstanding),
            ("pull_batch", self.pull_batch),
            ("max_ack_pending", self.max_ack_pending),
        ] {
            if value == 0 {
                return Err(FieldError::new(field, "must be at least 1".to_string()));
            }
        }
        if self.replicas > 5 {
            return Err(FieldError::new(
                "replicas",
                format!("{} is more than JetStream allows (5)", self.replicas),
            ));
        }
        if self.discard == Discard::New && self.max_msgs.is_none() && self.max_bytes.is_none() {
            return Err(FieldError::new(
                "discard",
                "`new` only matters with a limit: set max_msgs or max_bytes, or discard: old"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// With discard old and a limit, messages the stream let go are dropped by policy.
    pub fn drop_policy(&self) -> Option<String> {
        if self.discard != Discard::Old {
            return None;
        }
        match (self.max_msgs, self.max_bytes) {
            (Some(m), _) => Some(format!("stream limit max_msgs {m} with discard old")),
            (None, Some(b)) => Some(format!("stream limit max_bytes {b} with discard old")),
            (None, None) => None,
        }
    }
}

/// A duration such as `2m` or `500ms`, in nanoseconds.
fn optional_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(t) => brokerbench_model::units::parse_duration(&t)
            .map(|d| Some(d.as_nanos() as u64))
            .map_err(serde::de::Error::custom),
    }
}

/// A `nats://[user:password@]host:port` URL (`tls://` for TLS). Debug, Display and Serialize
/// hide the password.
pub type NatsUrl = BrokerUrl<Nats>;

/// NATS's kind of URL: a login of one part is a token, never shown; `tls://`, or the driver
/// file's `tls:` block, means TLS after the server's INFO.
pub struct Nats;

impl Scheme for Nats {
    const TYPE: &'static str = "NatsUrl";
    const PLAIN: &'static [&'static str] = &["nats"];
    const SECURE: &'static [&'static str] = &["tls"];
    const PORTS: (u16, u16) = (4222, 4222);
    const WRITE: &'static str = "write nats://host:port, or tls://host:port for TLS";
    const NO_HOST: &'static str = "the URL names no host; write nats://host:port";
    const ALONE: Alone = Alone::Token;
    type Path = ();

    fn bad_port(port: &str) -> String {
        format!("'{port}' is not a port number")
    }
    fn split(rest: &str) -> Result<(&str, ()), String> {
        Ok((rest.trim_end_matches('/'), ()))
    }
    fn path_text(_path: &()) -> String {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_urls_and_checks() {
        let c = NatsDriverConfig::default();
        assert_eq!(
            (c.storage, c.ack_policy, c.discard),
            (Storage::File, AckPolicy::Explicit, Discard::Old)
        );
        assert!(c.validate().is_ok() && c.drop_policy().is_none());
        let u = NatsUrl::parse("nats://bench:s3cret@127.0.0.1:4300").unwrap();
        assert_eq!(
            (u.address(), u.password()),
            ("127.0.0.1:4300".into(), Some("s3cret"))
        );
        // The generic redaction (Debug, Display, Serialize) is driver::url's; the family's
        // scheme shows the user and hides the password.
        assert_eq!(u.to_string(), "nats://bench:***@127.0.0.1:4300");
        // A user without a password is a token: hidden whole.
        let token = NatsUrl::parse("nats://t0ken@127.0.0.1:4300").unwrap();
        for shown in [format!("{token:?}"), token.to_string()] {
            assert!(!shown.contains("t0ken"), "{shown}");
            assert!(shown.contains("nats://***@127.0.0.1:4300"), "{shown}");
        }
        let secure = NatsUrl::parse("tls://bench:s3cret@h:1").unwrap();
        assert_eq!(secure.tls, Some(Default::default()));
        assert_eq!(secure.to_string(), "tls://bench:***@h:1");
        assert!(NatsUrl::parse("nats://h:1").unwrap().tls.is_none());
        assert!(NatsUrl::parse("http://h:1").unwrap_err().contains("tls://"));
        let c: NatsDriverConfig =
            brokerbench_model::yaml::from_str("tls: {ca_file: /ca.pem, server_name: mq}").unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(
            (tls.ca_file.unwrap(), tls.server_name.unwrap()),
            (std::path::PathBuf::from("/ca.pem"), "mq".to_string())
        );
        let typo = brokerbench_model::yaml::from_str::<NatsDriverConfig>("tls: {ca_flie: /ca.pem}")
            .unwrap_err()
            .to_string();
        assert!(typo.contains("ca_flie"), "{typo}");
        let c: NatsDriverConfig = brokerbench_model::yaml::from_str("discard: new").unwrap();
        assert_eq!(c.validate().unwrap_err().field, "discard");
        let c: NatsDriverConfig = brokerbench_model::yaml::from_str(
            "max_msgs: 10\nmax_bytes: 1KiB\nduplicate_window: 2m",
        )
        .unwrap();
        assert_eq!(
            (c.max_bytes, c.duplicate_window),
            (Some(1024), Some(120_000_000_000))
        );
        assert!(c.drop_policy().unwrap().contains("max_msgs 10"));
    }
}
