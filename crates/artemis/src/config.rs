//! The Artemis driver file.

use brokerbench_driver::url::{BrokerUrl, Scheme};
use serde::{Deserialize, Serialize};

/// Top-level Artemis driver field names, for `--set` routing and did-you-mean.
pub const ARTEMIS_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "broker_address",
    "tls",
    "durable",
    "max_outstanding",
    "consumer_window_size",
    "address_prefix",
    "delete_subscriptions",
    "max_size_messages",
    "max_size_bytes",
    "address_full_policy",
    "reconnect",
];

fn default_true() -> bool {
    true
}
fn default_outstanding() -> u32 {
    1000
}
fn default_window() -> u64 {
    1024 * 1024
}
fn default_prefix() -> String {
    "brokerbench".into()
}

/// ActiveMQ Artemis, driven over STOMP 1.2 by brokerbench's own client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtemisDriverConfig {
    /// `tcp://[user:password@]host:port` (an acceptor that speaks STOMP: Artemis's default
    /// 61616 speaks every protocol); absent means the managed local Artemis.
    #[serde(default)]
    pub broker_address: Option<ArtemisUrl>,
    /// TLS to the acceptor (`ssl://host:port`, or `tcp://…?sslEnabled=true`, turns it on
    /// too): the CA that signed the broker's certificate (`ca_file`; else the system's
    /// bundle), a client certificate (`cert_file`, `key_file`), `server_name`.
    #[serde(default)]
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
    /// Messages are durable (written to the journal before the broker confirms them).
    #[serde(default = "default_true")]
    pub durable: bool,
    /// Unconfirmed sends per producer at most.
    #[serde(default = "default_outstanding")]
    pub max_outstanding: u32,
    /// Bytes of deliveries the broker sends a consumer ahead of its acknowledgements
    /// (Artemis's `consumer-window-size`; -1 is not offered: a window bounds what is in
    /// flight).
    #[serde(default = "default_window", deserialize_with = "size")]
    pub consumer_window_size: u64,
    /// Address names start with this.
    #[serde(default = "default_prefix")]
    pub address_prefix: String,
    /// Delete the run's subscription queues afterwards.
    #[serde(default = "default_true")]
    pub delete_subscriptions: bool,
    /// Messages an address of the run holds at most before `address_full_policy` applies
    /// (Artemis's `max-size-messages`, set for the run's addresses through its management
    /// API); absent: the broker's own setting.
    #[serde(default)]
    pub max_size_messages: Option<u64>,
    /// Bytes an address of the run holds at most (`max-size-bytes`), likewise.
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub max_size_bytes: Option<u64>,
    /// What Artemis does with a message for a full address: `PAGE` (to disk: nothing lost),
    /// `DROP` (discards it silently, its send confirmed: brokerbench counts it as dropped by
    /// the broker) or `FAIL` (refuses the send and closes the connection); `BLOCK` is refused
    /// (it does not hold back a STOMP producer).
    #[serde(default)]
    pub address_full_policy: Option<crate::limits::FullPolicy>,
    /// After a lost connection, producers and consumers connect again with backoff and go on
    /// (a subscription member subscribes again to its durable queue, which the broker's
    /// journal kept); `reconnect: false` leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
}

impl Default for ArtemisDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

impl ArtemisDriverConfig {
    /// The limit the file sets for each of the run's addresses.
    pub fn limit(&self) -> crate::limits::AddressLimit {
        crate::limits::AddressLimit {
            max_size_messages: self.max_size_messages,
            max_size_bytes: self.max_size_bytes,
            address_full_policy: self.address_full_policy,
        }
    }

    /// Checks serde cannot make, each naming the field and the fix.
    pub fn validate(&self) -> Result<(), brokerbench_model::workload::FieldError> {
        use brokerbench_model::workload::FieldError;
        let name_ok = !self.address_prefix.is_empty()
            && self
                .address_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(FieldError::new(
                "address_prefix",
                format!(
                    "'{}' cannot start address names: use letters, digits, - and _ only (Artemis's wildcards use . # * and its fully qualified names ::)",
                    self.address_prefix
                ),
            ));
        }
        if self.max_outstanding == 0 {
            return Err(FieldError::new(
                "max_outstanding",
                "must be at least 1".to_string(),
            ));
        }
        if self.consumer_window_size > i32::MAX as u64 {
            return Err(FieldError::new(
                "consumer_window_size",
                format!(
                    "{} is more than Artemis takes ({} bytes, a Java int)",
                    self.consumer_window_size,
                    i32::MAX
                ),
            ));
        }
        crate::limits::validate(&self.limit())?;
        if self.tls.is_some() && self.broker_address.is_none() {
            return Err(FieldError::new(
                "tls",
                "the tls: block is for a TLS acceptor named by broker_address: write broker_address: ssl://host:61617 (`brokerbench broker status artemis --driver-file` prints the managed broker's)".to_string(),
            ));
        }
        if self.consumer_window_size == 0 {
            return Err(FieldError::new(
                "consumer_window_size",
                "must be at least 1 byte (e.g. 1MiB): with 0 the broker sends nothing".to_string(),
            ));
        }
        Ok(())
    }
}

/// A size: a number of bytes, or text with a unit (`1MiB`).
fn size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    brokerbench_model::units::optional_bytes(d)?
        .ok_or_else(|| serde::de::Error::custom("needs a size such as 1MiB"))
}

/// A `tcp://[user:password@]host:port` URL (`ssl://`, or `sslEnabled=true`, for TLS). Debug,
/// Display and Serialize hide the password.
pub type ArtemisUrl = BrokerUrl<Artemis>;

/// Artemis's kind of URL, as its core-protocol clients write it, for its STOMP acceptor.
pub struct Artemis;

impl Scheme for Artemis {
    const TYPE: &'static str = "ArtemisUrl";
    const PLAIN: &'static [&'static str] = &["tcp", "stomp"];
    const SECURE: &'static [&'static str] = &["ssl", "stomp+ssl"];
    /// 61617: the TLS acceptor of Artemis's examples (and of the managed broker).
    const PORTS: (u16, u16) = (61616, 61617);
    const WRITE: &'static str =
        "write tcp://host:port (a STOMP acceptor of Artemis), or ssl://host:port for TLS";
    const NO_HOST: &'static str = "the URL names no host; write tcp://host:port";
    type Path = ();

    fn bad_port(_port: &str) -> String {
        "what follows the host's last `:` is not a port number; write tcp://[user:password@]host:port".into()
    }
    /// Core-protocol URL options (`?ha=true`) mean nothing over STOMP.
    fn split(rest: &str) -> Result<(&str, ()), String> {
        let address = rest.split(['?', '#']).next().unwrap_or(rest);
        Ok((address.trim_end_matches('/'), ()))
    }
    fn path_text(_path: &()) -> String {
        String::new()
    }
    fn asks_tls(rest: &str) -> bool {
        rest.to_ascii_lowercase().contains("sslenabled=true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_urls_and_checks() {
        let c = ArtemisDriverConfig::default();
        assert!(c.durable && c.delete_subscriptions && c.broker_address.is_none());
        assert_eq!((c.max_outstanding, c.consumer_window_size), (1000, 1 << 20));
        assert!(c.validate().is_ok());
        let u = ArtemisUrl::parse("tcp://bench:s3cret@127.0.0.1:61717?ha=true").unwrap();
        assert_eq!(
            (u.address(), u.password()),
            ("127.0.0.1:61717".into(), Some("s3cret"))
        );
        // The generic redaction (Debug, Display, Serialize) is driver::url's; the family's
        // scheme shows the user and hides the password.
        assert!(
            u.to_string().starts_with("tcp://bench:***@127.0.0.1:61717"),
            "{u}"
        );
        assert_eq!(ArtemisUrl::parse("localhost").unwrap().port, 61616);
        let secure = ArtemisUrl::parse("tcp://h:61617?sslEnabled=true").unwrap();
        assert_eq!(
            (secure.to_string(), secure.tls.is_some()),
            ("ssl://h:61617".into(), true)
        );
        let plain = ArtemisUrl::parse("tcp://h:61617").unwrap();
        let settings = brokerbench_driver::tls::TlsSettings {
            ca_file: Some("/ca.pem".into()),
            ..Default::default()
        };
        assert_eq!(plain.with_tls(Some(&settings)).tls, Some(settings));
        let odd = ArtemisUrl::parse("tcp://bench:s3?cr@t@h:61616").unwrap();
        assert_eq!(
            (odd.address(), odd.password()),
            ("h:61616".into(), Some("s3?cr@t"))
        );
        assert!(ArtemisUrl::parse("amqp://h:1")
            .unwrap_err()
            .contains("tcp://host:port"));
        let c: ArtemisDriverConfig =
            brokerbench_model::yaml::from_str("consumer_window_size: 64KiB").unwrap();
        assert_eq!(c.consumer_window_size, 65536);
        let c: ArtemisDriverConfig =
            brokerbench_model::yaml::from_str("address_prefix: a.b").unwrap();
        assert_eq!(c.validate().unwrap_err().field, "address_prefix");
    }
}
