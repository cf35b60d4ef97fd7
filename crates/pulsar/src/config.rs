//! The Pulsar driver file.

use std::time::Duration;

use brokerbench_model::workload::FieldError;
use serde::{Deserialize, Serialize};

use crate::commands::SubType;

/// Top-level Pulsar driver field names, for `--set` routing and did-you-mean.
pub const PULSAR_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "service_url",
    "http_url",
    "auth_token",
    "tls",
    "namespace",
    "topic_type",
    "topic_prefix",
    "persistence",
    "backlog_quota_size",
    "backlog_quota_policy",
    "batching",
    "batching_max_publish_delay",
    "batching_max_messages",
    "batching_max_bytes",
    "max_pending_messages",
    "subscription_type",
    "receiver_queue_size",
    "ack",
    "delete_topics",
    "reconnect",
];

/// Apache Pulsar, driven over its binary protocol by brokerbench's own client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PulsarDriverConfig {
    /// `pulsar://host:port` (the binary protocol); absent means the managed local Pulsar.
    #[serde(default)]
    pub service_url: Option<PulsarUrl>,
    /// The admin REST API (`http://host:8080`), for partitioned topics, persistence policies
    /// and deleting the run's topics; absent: the service URL's host on port 8080.
    #[serde(default)]
    pub http_url: Option<String>,
    /// A token for Pulsar's token authentication (sent as `token` in CONNECT and as a bearer
    /// token to the admin API); never written out.
    #[serde(default)]
    pub auth_token: Option<Token>,
    /// How a `pulsar+ssl://` service URL is trusted: the CA that signed the broker's
    /// certificate (`ca_file`; else the system's bundle), a client certificate (`cert_file`,
    /// `key_file`: Pulsar's TLS authentication when no token is given), `server_name`.
    #[serde(default)]
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
    /// `tenant/namespace` the run's topics live in.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// `persistent` (stored in BookKeeper, confirmed once written) or `non-persistent`
    /// (held in the broker's memory only, confirmed on arrival, dropped when no consumer can
    /// take them).
    #[serde(default)]
    pub topic_type: TopicType,
    /// Topic names start with this.
    #[serde(default = "default_prefix")]
    pub topic_prefix: String,
    /// BookKeeper's quorums for the run's topics; when given, the run gets a namespace of its
    /// own (`<namespace>-<run id>`) with these persistence policies, deleted afterwards.
    #[serde(default)]
    pub persistence: Option<Persistence>,
    /// Bytes a subscription of the run may leave unacknowledged; when given, the run gets a
    /// namespace of its own with this backlog quota.
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub backlog_quota_size: Option<u64>,
    /// What Pulsar does past the quota (see [`crate::quota`]).
    #[serde(default)]
    pub backlog_quota_policy: Option<crate::quota::QuotaPolicy>,
    /// Producers send several messages in one entry (Pulsar's batching).
    #[serde(default = "default_true")]
    pub batching: bool,
    /// A batch is sent at the latest this long after its first message.
    #[serde(default = "default_delay")]
    pub batching_max_publish_delay: Delay,
    /// A batch holds at most this many messages.
    #[serde(default = "default_batch_messages")]
    pub batching_max_messages: u32,
    /// A batch holds at most this many bytes of payload.
    #[serde(default = "default_batch_bytes", deserialize_with = "size")]
    pub batching_max_bytes: u64,
    /// Messages a producer has sent (or batched) and the broker has not confirmed, at most.
    #[serde(default = "default_pending")]
    pub max_pending_messages: u32,
    /// How a subscription's consumers share its messages: `Exclusive` (one consumer),
    /// `Failover` (one active consumer per partition, the others standing by), `Shared`
    /// (round robin) or `Key_Shared` (by key).
    #[serde(default)]
    pub subscription_type: SubscriptionType,
    /// Messages the broker sends a consumer ahead of what it has handed on (its permits).
    #[serde(default = "default_queue")]
    pub receiver_queue_size: u32,
    /// `individual` (each message acknowledged) or `cumulative` (everything up to a message
    /// at once; not with Shared or Key_Shared).
    #[serde(default)]
    pub ack: AckMode,
    /// Delete the run's topics (and their subscriptions) afterwards.
    #[serde(default = "default_true")]
    pub delete_topics: bool,
    /// After a lost connection, producers and consumers connect again with backoff and go on
    /// (a consumer resumes its durable subscription); `reconnect: false` leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
}

fn default_true() -> bool {
    true
}
fn default_namespace() -> String {
    "public/default".into()
}
fn default_prefix() -> String {
    "brokerbench".into()
}
fn default_delay() -> Delay {
    Delay(Duration::from_millis(1))
}
fn default_batch_messages() -> u32 {
    1000
}
fn default_batch_bytes() -> u64 {
    128 * 1024
}
fn default_pending() -> u32 {
    1000
}
fn default_queue() -> u32 {
    1000
}

/// Where messages are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopicType {
    #[default]
    Persistent,
    NonPersistent,
}

impl TopicType {
    /// The scheme of a topic name and the admin API's path segment.
    pub fn domain(self) -> &'static str {
        match self {
            TopicType::Persistent => "persistent",
            TopicType::NonPersistent => "non-persistent",
        }
    }
}

/// BookKeeper's quorums: each entry written to `write_quorum` of `ensemble_size` bookies and
/// confirmed once `ack_quorum` have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persistence {
    pub ensemble_size: u32,
    pub write_quorum: u32,
    pub ack_quorum: u32,
    /// The broker drops a message whose sequence id it has seen from that producer.
    #[serde(default)]
    pub deduplication: bool,
}

/// A subscription's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SubscriptionType {
    Exclusive,
    #[default]
    Failover,
    Shared,
    #[serde(rename = "Key_Shared")]
    KeyShared,
}

impl SubscriptionType {
    pub fn wire(self) -> SubType {
        match self {
            SubscriptionType::Exclusive => SubType::Exclusive,
            SubscriptionType::Failover => SubType::Failover,
            SubscriptionType::Shared => SubType::Shared,
            SubscriptionType::KeyShared => SubType::KeyShared,
        }
    }

    /// Whether one consumer at a time receives a partition's messages.
    pub fn one_active(self) -> bool {
        matches!(
            self,
            SubscriptionType::Exclusive | SubscriptionType::Failover
        )
    }
}

/// How deliveries are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckMode {
    #[default]
    Individual,
    Cumulative,
}

/// A duration written with its unit (`1ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay(pub Duration);

impl Serialize for Delay {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&brokerbench_model::units::format_nanos(
            self.0.as_nanos() as u64
        ))
    }
}

impl<'de> Deserialize<'de> for Delay {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        brokerbench_model::units::parse_duration(&text)
            .map(Delay)
            .map_err(serde::de::Error::custom)
    }
}

/// A secret: shown and written as `***`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl Serialize for Token {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// A size: a number of bytes, or text with a unit (`128KiB`).
fn size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    brokerbench_model::units::optional_bytes(d)?
        .ok_or_else(|| serde::de::Error::custom("needs a size such as 128KiB"))
}

impl Default for PulsarDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

impl PulsarDriverConfig {
    /// The backlog quota the file sets for the run's namespace.
    pub fn backlog_quota(&self) -> crate::quota::BacklogQuota {
        crate::quota::BacklogQuota {
            backlog_quota_size: self.backlog_quota_size,
            backlog_quota_policy: self.backlog_quota_policy,
        }
    }

    /// Checks serde cannot make, each naming the field and the fix.
    pub fn validate(&self) -> Result<(), FieldError> {
        check_name("topic_prefix", &self.topic_prefix)?;
        self.validate_tls()?;
        let parts: Vec<&str> = self.namespace.split('/').collect();
        if parts.len() != 2 || parts.iter().any(|p| check_name("namespace", p).is_err()) {
            return Err(FieldError::new(
                "namespace",
                format!(
                    "'{}' is not tenant/namespace (e.g. public/default)",
                    self.namespace
                ),
            ));
        }
        for (field, value) in [
            ("batching_max_messages", self.batching_max_messages),
            ("max_pending_messages", self.max_pending_messages),
            ("receiver_queue_size", self.receiver_queue_size),
        ] {
            if value == 0 {
                return Err(FieldError::new(field, "must be at least 1".to_string()));
            }
        }
        if self.batching_max_bytes == 0 || self.batching_max_bytes > MAX_BATCH_BYTES {
            return Err(FieldError::new(
                "batching_max_bytes",
                format!("{} is not between 1 byte and 5MiB (the broker's maxMessageSize by default; a larger entry closes the connection)", self.batching_max_bytes),
            ));
        }
        if self.subscription_type == SubscriptionType::KeyShared && self.batching {
            return Err(FieldError::new(
                "subscription_type",
                "Key_Shared sends each key to one member, but a batch carries no key of its own (brokerbench batches across keys): set batching: false".to_string(),
            ));
        }
        if self.ack == AckMode::Cumulative && !self.subscription_type.one_active() {
            return Err(FieldError::new(
                "ack",
                format!(
                    "cumulative acknowledgements are not allowed on a {:?} subscription (Pulsar refuses them): use ack: individual, or subscription_type: Failover or Exclusive",
                    self.subscription_type
                ),
            ));
        }
        if let Some(http) = &self.http_url {
            if !http.starts_with("http://") && !http.starts_with("https://") {
                return Err(FieldError::new(
                    "http_url",
                    format!(
                        "'{}': write http://host:8080 (Pulsar's admin REST API)",
                        brokerbench_model::redact::redact_uri(http)
                    ),
                ));
            }
        }
        crate::quota::validate(&self.backlog_quota())?;
        self.persistence.as_ref().map_or(Ok(()), validate_quorums)
    }

    /// Whether the run gets a namespace of its own (for its persistence policies or backlog
    /// quota).
    pub fn own_namespace(&self) -> bool {
        self.persistence.is_some() || self.backlog_quota_size.is_some()
    }

    /// The admin API's base URL: `http_url`, else the broker's host on port 8080.
    pub fn admin_url(&self, service: &PulsarUrl) -> String {
        match &self.http_url {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => format!("http://{}:8080", service.host),
        }
    }
}

impl PulsarDriverConfig {
    /// A `tls:` block goes with a `pulsar+ssl://` service URL.
    fn validate_tls(&self) -> Result<(), FieldError> {
        let secure = self.service_url.as_ref().is_some_and(|u| u.tls.is_some());
        if self.tls.is_some() && !secure {
            return Err(FieldError::new(
                "tls",
                "the tls: block is for a TLS listener: write service_url: pulsar+ssl://host:6651 (`brokerbench broker status pulsar --driver-file` prints the managed broker's)".to_string(),
            ));
        }
        let admin = match (&self.http_url, &self.service_url) {
            (Some(url), _) => url.clone(),
            (None, Some(service)) => self.admin_url(service),
            (None, None) => return Ok(()),
        };
        let host = admin
            .strip_prefix("http://")
            .and_then(|rest| rest.split([':', '/']).next());
        let loopback = host.is_some_and(|h| h == "localhost" || h.starts_with("127."));
        if secure && self.auth_token.is_some() && host.is_some() && !loopback {
            return Err(FieldError::new(
                "http_url",
                format!("the token would go to the admin API ({admin}) in plain HTTP: give http_url: https://host:8443 (the broker's webServicePortTls)"),
            ));
        }
        Ok(())
    }
}

/// The largest batch: Pulsar's default `maxMessageSize`.
const MAX_BATCH_BYTES: u64 = 5 * 1024 * 1024;

/// ack ≤ write ≤ ensemble, each at least 1.
fn validate_quorums(p: &Persistence) -> Result<(), FieldError> {
    if p.ack_quorum == 0 || p.ack_quorum > p.write_quorum || p.write_quorum > p.ensemble_size {
        return Err(FieldError::new(
            "persistence",
            format!(
                "ensemble_size {}, write_quorum {}, ack_quorum {}: BookKeeper needs 1 <= ack_quorum <= write_quorum <= ensemble_size",
                p.ensemble_size, p.write_quorum, p.ack_quorum
            ),
        ));
    }
    Ok(())
}

/// Letters, digits, `-` and `_` (a topic or namespace name's safe part).
fn check_name(field: &str, name: &str) -> Result<(), FieldError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        return Ok(());
    }
    Err(FieldError::new(
        field,
        format!("'{name}' cannot be used in Pulsar names here: use letters, digits, - and _"),
    ))
}

/// A `pulsar://host:port` URL, or `pulsar+ssl://host:port` for TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulsarUrl {
    pub host: String,
    pub port: u16,
    token: Option<Token>,
    /// Set for `pulsar+ssl://`: how the broker's certificate is trusted.
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
}

impl PulsarUrl {
    pub fn parse(text: &str) -> Result<PulsarUrl, String> {
        let (rest, tls, default_port) = if let Some(rest) = text.strip_prefix("pulsar://") {
            (rest, None, 6650)
        } else if let Some(rest) = text.strip_prefix("pulsar+ssl://") {
            (rest, Some(Default::default()), 6651)
        } else {
            return Err(format!(
                "'{}': write pulsar://host:6650 (Pulsar's binary protocol), or pulsar+ssl://host:6651 for TLS",
                brokerbench_model::redact::redact_uri(text)
            ));
        };
        let address = rest.split(['/', '?', ',']).next().unwrap_or(rest);
        let (host, port) = match address.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| "what follows the host's `:` is not a port number".to_string())?,
            ),
            None => (address, default_port),
        };
        if host.is_empty() || host.contains('@') {
            return Err("write pulsar://host:port (a token goes in auth_token)".into());
        }
        Ok(PulsarUrl {
            host: host.to_string(),
            port,
            token: None,
            tls,
        })
    }

    /// The same broker, trusted as the driver file's `tls:` block says (a `pulsar+ssl://`
    /// URL only: a plain one is refused when the file is checked).
    pub fn with_tls(mut self, settings: Option<&brokerbench_driver::tls::TlsSettings>) -> Self {
        if let (Some(tls), Some(settings)) = (&mut self.tls, settings) {
            *tls = settings.clone();
        }
        self
    }

    /// The same broker, with a token for CONNECT.
    pub fn with_token(mut self, token: Option<&Token>) -> Self {
        self.token = token.cloned();
        self
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_ref().map(|t| t.0.as_str())
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl std::fmt::Display for PulsarUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls.is_some() {
            "pulsar+ssl"
        } else {
            "pulsar"
        };
        write!(f, "{scheme}://{}", self.address())
    }
}

impl Serialize for PulsarUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for PulsarUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        PulsarUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> PulsarDriverConfig {
        brokerbench_model::yaml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_urls_and_checks() {
        let c = PulsarDriverConfig::default();
        assert!(c.batching && c.delete_topics && c.service_url.is_none());
        assert_eq!(
            c.batching_max_publish_delay,
            Delay(Duration::from_millis(1))
        );
        assert_eq!(c.subscription_type, SubscriptionType::Failover);
        assert!(c.validate().is_ok());
        let u = PulsarUrl::parse("pulsar://broker:6651").unwrap();
        assert_eq!(u.address(), "broker:6651");
        assert_eq!(c.admin_url(&u), "http://broker:8080");
        assert!(PulsarUrl::parse("http://h:1").is_err());
        let secure = PulsarUrl::parse("pulsar+ssl://broker").unwrap();
        assert_eq!(
            (secure.to_string(), secure.tls.is_some()),
            ("pulsar+ssl://broker:6651".into(), true)
        );
        let c = parse("service_url: pulsar+ssl://h:1\ntls: {ca_file: /ca.pem}");
        assert!(c.validate().is_ok());
        let u = c.service_url.clone().unwrap().with_tls(c.tls.as_ref());
        assert_eq!(
            u.tls.unwrap().ca_file.unwrap(),
            std::path::Path::new("/ca.pem")
        );
        let c = parse("service_url: pulsar://h:1\ntls: {ca_file: /ca.pem}");
        assert_eq!(c.validate().unwrap_err().field, "tls");
        let c = parse("service_url: pulsar+ssl://h:6651\nauth_token: t");
        assert_eq!(c.validate().unwrap_err().field, "http_url");
        let c = parse("service_url: pulsar+ssl://127.0.0.1:6651\nauth_token: t");
        assert!(c.validate().is_ok());
        let c = parse("subscription_type: Shared\nack: cumulative");
        assert_eq!(c.validate().unwrap_err().field, "ack");
        let c = parse("persistence: {ensemble_size: 1, write_quorum: 2, ack_quorum: 1}");
        assert_eq!(c.validate().unwrap_err().field, "persistence");
        let c = parse("subscription_type: Key_Shared\nbatching: false\ntopic_type: non-persistent\nbatching_max_bytes: 64KiB\nauth_token: s3cret");
        assert!(c.validate().is_ok());
        let u = PulsarUrl::parse("pulsar://h:1")
            .unwrap()
            .with_token(c.auth_token.as_ref());
        assert!(!format!("{u:?}").contains("s3cret") && u.token() == Some("s3cret"));
        assert_eq!(c.subscription_type, SubscriptionType::KeyShared);
        assert_eq!(c.topic_type.domain(), "non-persistent");
        assert_eq!(c.batching_max_bytes, 65536);
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(!serde_json::to_string(&c).unwrap().contains("s3cret"));
        assert_eq!(
            parse("namespace: a/b/c").validate().unwrap_err().field,
            "namespace"
        );
    }
}
