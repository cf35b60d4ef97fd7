//! The RabbitMQ driver file: exchanges, queues, confirms and acknowledgements, and the AMQP URI.

use serde::{Deserialize, Serialize};

use brokerbench_model::workload::FieldError;

fn default_true() -> bool {
    true
}
fn default_prefix() -> String {
    "brokerbench".to_string()
}

/// Top-level RabbitMQ driver field names, used for `--set` routing and did-you-mean.
pub const RABBITMQ_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "uri",
    "failover_uris",
    "exchange",
    "queues_per_topic",
    "queue",
    "persistent",
    "confirms",
    "ack",
    "prefetch",
    "channels_per_connection",
    "delete_queues",
    "reconnect",
];

// ------------------------------------------------------------------------------ RabbitMQ

fn default_one() -> u32 {
    1
}
fn default_prefetch() -> u16 {
    1000
}
fn default_max_outstanding() -> u32 {
    1000
}

/// RabbitMQ (and other AMQP 0-9-1 brokers), driven through brokerbench's own AMQP client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitMqDriverConfig {
    /// `amqp://user:password@host:port/vhost`; absent means "start and use the managed local
    /// broker". Its password never appears in Debug output, errors or the serialized form.
    #[serde(default)]
    pub uri: Option<AmqpUri>,
    /// Other nodes of `uri`'s cluster: a connection that cannot be opened (its node is down)
    /// moves every later one to the next of these, in turn. Without `uri`, the managed
    /// cluster's other nodes.
    #[serde(default)]
    pub failover_uris: Vec<AmqpUri>,
    /// The exchange each topic publishes to.
    #[serde(default)]
    pub exchange: ExchangeConfig,
    /// Queues bound to each topic's exchange; each is a subscription that receives every
    /// message routed to it (with a fanout, or several queues on one key, every queue gets all).
    #[serde(default = "default_one")]
    pub queues_per_topic: u32,
    /// How the queues are declared.
    #[serde(default)]
    pub queue: QueueConfig,
    /// Publish with delivery mode 2 (persistent) rather than 1 (transient).
    #[serde(default = "default_true")]
    pub persistent: bool,
    /// Publisher confirms: with them an acknowledgement is the broker's basic.ack.
    #[serde(default)]
    pub confirms: ConfirmsConfig,
    /// How consumers acknowledge deliveries.
    #[serde(default)]
    pub ack: AckConfig,
    /// basic.qos prefetch count per consumer channel (unacknowledged deliveries at most);
    /// 0 means no limit. Not applied by the broker to auto-ack consumers.
    #[serde(default = "default_prefetch")]
    pub prefetch: u16,
    /// Producers (or consumers) sharing one AMQP connection, each on its own channel.
    #[serde(default = "default_one")]
    pub channels_per_connection: u32,
    /// Delete the run's exchanges and queues after the run.
    #[serde(default = "default_true")]
    pub delete_queues: bool,
    /// After a lost connection, producers and consumers reconnect with backoff, declare
    /// their exchange and queues again and go on; `reconnect: false` leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
}

impl Default for RabbitMqDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

/// The exchange of each topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeConfig {
    /// Exchange names start with this; the rest is `-<workload>-<run id>-<topic>`.
    #[serde(default = "default_prefix")]
    pub name: String,
    /// Exchange type, which decides how messages reach the queues.
    #[serde(default, rename = "type")]
    pub kind: ExchangeKind,
}

impl Default for ExchangeConfig {
    fn default() -> Self {
        ExchangeConfig {
            name: default_prefix(),
            kind: ExchangeKind::Direct,
        }
    }
}

/// AMQP exchange types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExchangeKind {
    /// Queues bound with the topic's name as routing key.
    #[default]
    Direct,
    /// Every bound queue gets every message; the routing key is ignored.
    Fanout,
    /// Queues bound with the topic's name as binding pattern.
    Topic,
    /// Queues bound on a `topic` message header (x-match: any).
    Headers,
}

impl ExchangeKind {
    /// The name AMQP uses for the type.
    pub fn as_str(&self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

/// How each queue is declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// `x-queue-type`.
    #[serde(default, rename = "type")]
    pub kind: QueueKind,
    /// Survives a broker restart (quorum and stream queues always are).
    #[serde(default = "default_true")]
    pub durable: bool,
    /// `x-queue-mode: lazy`: a classic queue that keeps messages on disk (RabbitMQ 3.12 and
    /// later ignore it: their classic queues always behave so).
    #[serde(default)]
    pub lazy: bool,
    /// `x-max-length` in messages, or none.
    #[serde(default)]
    pub max_length: Option<u64>,
    /// `x-max-length-bytes` in bytes (units such as 64MiB allowed), or none.
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub max_length_bytes: Option<u64>,
    /// `x-overflow`: what the broker does when a length limit is reached.
    #[serde(default)]
    pub overflow: Overflow,
    /// `x-quorum-initial-group-size`: how many members (copies) a quorum queue starts with;
    /// none: the broker's default (RabbitMQ 3.10: 3, or every node of a smaller cluster).
    #[serde(default)]
    pub initial_group_size: Option<u32>,
}

impl Default for QueueConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

/// Queue types (`x-queue-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueKind {
    #[default]
    Classic,
    Quorum,
    Stream,
}

impl QueueKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            QueueKind::Classic => "classic",
            QueueKind::Quorum => "quorum",
            QueueKind::Stream => "stream",
        }
    }
}

/// `x-overflow` behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// Discard the oldest messages (they are reported as dropped by the broker).
    #[default]
    DropHead,
    /// Refuse new messages; with confirms each refusal is a nack, counted as `rejected`.
    RejectPublish,
}

impl Overflow {
    pub fn as_str(&self) -> &'static str {
        match self {
            Overflow::DropHead => "drop-head",
            Overflow::RejectPublish => "reject-publish",
        }
    }
}

/// Publisher confirms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmsConfig {
    /// confirm.select on every producer channel; off means at-most-once publishing.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Unconfirmed messages per producer at most; more is backpressure.
    #[serde(default = "default_max_outstanding")]
    pub max_outstanding: u32,
}

impl Default for ConfirmsConfig {
    fn default() -> Self {
        ConfirmsConfig {
            enabled: true,
            max_outstanding: default_max_outstanding(),
        }
    }
}

/// Consumer acknowledgements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckConfig {
    #[serde(default)]
    pub mode: AckMode,
    /// Manual mode: acknowledge every n-th delivery with multiple=true (1 = each one).
    #[serde(default = "default_one")]
    pub multiple_every: u32,
}

impl Default for AckConfig {
    fn default() -> Self {
        AckConfig {
            mode: AckMode::Manual,
            multiple_every: 1,
        }
    }
}

/// How consumers acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckMode {
    /// no_ack consume: the broker forgets a message once it is sent.
    Auto,
    /// basic.ack after the consumer has read the message.
    #[default]
    Manual,
}

impl RabbitMqDriverConfig {
    /// The checks serde cannot make: combinations the broker would refuse or that would stall a
    /// run. Each error names the field and the fix.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.uri.is_none() && !self.failover_uris.is_empty() {
            return Err(FieldError::new(
                "failover_uris",
                "goes with uri: give the broker's uri too, or leave both out to use the managed broker (whose cluster nodes are the failover ones)",
            ));
        }
        if self.exchange.name.is_empty() || self.exchange.name.starts_with("amq.") {
            return Err(FieldError::new(
                "exchange.name",
                format!(
                    "'{}' cannot start exchange names (empty, or the reserved amq. prefix); use e.g. brokerbench",
                    self.exchange.name
                ),
            ));
        }
        if self.exchange.name.len() > 100 {
            return Err(FieldError::new(
                "exchange.name",
                "is longer than 100 bytes; AMQP names are at most 255 bytes and the run adds the workload name, run id and topic; use a shorter prefix",
            ));
        }
        for (field, value) in [
            ("queues_per_topic", self.queues_per_topic),
            ("channels_per_connection", self.channels_per_connection),
        ] {
            if value == 0 {
                return Err(FieldError::new(field, "must be at least 1"));
            }
        }
        self.validate_queue()?;
        self.validate_confirms_and_acknowledgements()
    }

    /// The checks of the queue's settings: those its type does not have or needs, and what
    /// reject-publish needs to act and be seen.
    fn validate_queue(&self) -> Result<(), FieldError> {
        let queue = &self.queue;
        let kind = queue.kind.as_str();
        if queue.kind != QueueKind::Classic && !queue.durable {
            return Err(FieldError::new(
                "queue.durable",
                format!("{kind} queues are always durable; set queue.durable: true, or use queue.type: classic for a transient queue"),
            ));
        }
        match queue.initial_group_size {
            Some(_) if queue.kind != QueueKind::Quorum => {
                return Err(FieldError::new(
                    "queue.initial_group_size",
                    format!("only quorum queues have members to count ({kind} queues do not); remove it or use queue.type: quorum"),
                ))
            }
            Some(0) => {
                return Err(FieldError::new(
                    "queue.initial_group_size",
                    "must be at least 1 (a quorum queue of 3 members survives one node down)",
                ))
            }
            _ => {}
        }
        if queue.lazy && queue.kind != QueueKind::Classic {
            return Err(FieldError::new(
                "queue.lazy",
                format!("only classic queues can be lazy ({kind} queues keep messages on disk anyway); remove queue.lazy or use queue.type: classic"),
            ));
        }
        if queue.kind == QueueKind::Stream {
            self.validate_stream_queue()?;
        }
        if queue.overflow == Overflow::RejectPublish {
            if queue.max_length.is_none() && queue.max_length_bytes.is_none() {
                return Err(FieldError::new(
                    "queue.overflow",
                    "reject-publish acts only when the queue has a length limit; set queue.max_length or queue.max_length_bytes, or remove queue.overflow",
                ));
            }
            if !self.confirms.enabled {
                return Err(FieldError::new(
                    "confirms.enabled",
                    "with queue.overflow: reject-publish the broker reports refused messages only through publisher confirms; set confirms.enabled: true",
                ));
            }
        }
        Ok(())
    }

    /// The checks of stream queues: manual acknowledgements and a prefetch limit, no
    /// message-count limit and no overflow behaviour.
    fn validate_stream_queue(&self) -> Result<(), FieldError> {
        let queue = &self.queue;
        if self.ack.mode == AckMode::Auto {
            return Err(FieldError::new(
                "ack.mode",
                "stream queues need manual acknowledgements; set ack.mode: manual",
            ));
        }
        if self.prefetch == 0 {
            return Err(FieldError::new(
                "prefetch",
                "stream queues need a prefetch limit; set prefetch to 1 or more, e.g. 1000",
            ));
        }
        if queue.max_length.is_some() {
            return Err(FieldError::new(
                "queue.max_length",
                "stream queues have no message-count limit; use queue.max_length_bytes (retention by size) or queue.type: classic",
            ));
        }
        if queue.overflow == Overflow::RejectPublish {
            return Err(FieldError::new(
                "queue.overflow",
                "stream queues do not support overflow behaviours; remove queue.overflow or use queue.type: classic or quorum",
            ));
        }
        Ok(())
    }

    /// The checks of publisher confirms and consumer acknowledgements: at least one
    /// outstanding confirm, and acknowledging every n-th delivery only in manual mode and
    /// within the prefetch limit.
    fn validate_confirms_and_acknowledgements(&self) -> Result<(), FieldError> {
        if self.confirms.enabled && self.confirms.max_outstanding == 0 {
            return Err(FieldError::new(
                "confirms.max_outstanding",
                "must be at least 1 (unconfirmed messages per producer)",
            ));
        }
        if self.ack.multiple_every == 0 {
            return Err(FieldError::new(
                "ack.multiple_every",
                "must be at least 1 (1 acknowledges each delivery on its own)",
            ));
        }
        if self.ack.mode == AckMode::Auto && self.ack.multiple_every != 1 {
            return Err(FieldError::new(
                "ack.multiple_every",
                "applies only to ack.mode: manual; remove it or set ack.mode: manual",
            ));
        }
        if self.ack.mode == AckMode::Manual
            && self.prefetch != 0
            && self.ack.multiple_every > u32::from(self.prefetch)
        {
            return Err(FieldError::new(
                "ack.multiple_every",
                format!(
                    "{} exceeds prefetch: {}, so a consumer would stop receiving before it acknowledges; lower ack.multiple_every or raise prefetch",
                    self.ack.multiple_every, self.prefetch
                ),
            ));
        }
        Ok(())
    }

    /// Why the broker may discard acknowledged messages with this configuration, if it may.
    pub fn drop_policy(&self) -> Option<String> {
        let queue = &self.queue;
        let limits: Vec<String> = [
            queue.max_length.map(|n| format!("max_length: {n}")),
            queue
                .max_length_bytes
                .map(|n| format!("max_length_bytes: {n}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if limits.is_empty() {
            return None;
        }
        match (queue.kind, queue.overflow) {
            (QueueKind::Stream, _) => Some(format!(
                "stream queues with {} remove their oldest segments",
                limits.join(", ")
            )),
            (_, Overflow::DropHead) => Some(format!(
                "queues with {} and overflow: drop-head discard their oldest messages when full",
                limits.join(", ")
            )),
            (_, Overflow::RejectPublish) => None,
        }
    }
}

// ------------------------------------------------------------------------------ AMQP URI

/// Port of `amqp://` URIs that name none.
pub const AMQP_DEFAULT_PORT: u16 = 5672;
/// The IANA port for AMQP over TLS, amqps://.
pub const AMQPS_DEFAULT_PORT: u16 = 5671;

/// A parsed `amqp://user:password@host:port/vhost?heartbeat=N` URI. Debug, Display and
/// Serialize show it with the password replaced by `***`; only [`AmqpUri::password`] gives it.
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpUri {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// User name, percent-decoded (guest when the URI names none).
    pub username: String,
    password: String,
    /// Virtual host, percent-decoded (`/` when the URI has no path).
    pub vhost: String,
    /// Heartbeat interval in seconds asked for by `?heartbeat=N`, if given.
    pub heartbeat: Option<u16>,
    /// `amqps://`: TLS, with the files of `?cacertfile=…&certfile=…&keyfile=…` and
    /// `?server_name_indication=…` (RabbitMQ's URI query parameters).
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
    /// `?auth_mechanism=external`: log in as the client certificate's subject (SASL
    /// EXTERNAL) instead of with user and password (PLAIN).
    pub external: bool,
    /// Whether the URI carried a password (for the redacted form).
    has_password: bool,
}

impl AmqpUri {
    /// Parses an `amqp://` URI. Errors never contain the password.
    pub fn parse(text: &str) -> Result<AmqpUri, String> {
        let text = text.trim();
        let (secure, rest) = split_scheme(text)?;
        // The userinfo ends at the last '@' before the path, so that a password holding a
        // raw '/' or '@' cannot leak into the host part of an error message.
        let (userinfo, hostpart) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let (authority, path_and_query) = match hostpart.find(['/', '?']) {
            Some(i) => hostpart.split_at(i),
            None => (hostpart, ""),
        };
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        let (username, password, has_password) = credentials(userinfo)?;
        let (host, port) = host_and_port(authority, secure)?;
        let vhost = virtual_host(path)?;
        let query = UriQuery::parse(query.unwrap_or(""), secure)?;
        Ok(AmqpUri {
            host,
            port,
            username,
            password,
            vhost,
            heartbeat: query.heartbeat,
            tls: secure.then_some(query.tls),
            external: query.external,
            has_password,
        })
    }

    /// `amqp://guest:guest@127.0.0.1:<port>/%2f`: a local broker with RabbitMQ's default user
    /// (which may log in from localhost only), e.g. the managed broker.
    pub fn localhost(port: u16) -> AmqpUri {
        AmqpUri {
            host: "127.0.0.1".into(),
            port,
            username: "guest".into(),
            password: "guest".into(),
            vhost: "/".into(),
            heartbeat: None,
            tls: None,
            external: false,
            has_password: true,
        }
    }

    /// The password (guest when the URI names no user). Handle with care: never print it.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// `host:port` as used for a TCP connection, without credentials.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URI with the password replaced by `***`.
    pub fn redacted(&self) -> String {
        let vhost = if self.vhost == "/" {
            "%2f".to_string()
        } else {
            percent_encode(&self.vhost)
        };
        let password = if self.has_password { ":***" } else { "" };
        let mut query = Vec::new();
        if let Some(h) = self.heartbeat {
            query.push(format!("heartbeat={h}"));
        }
        if let Some(tls) = &self.tls {
            for (key, path) in [
                ("cacertfile", &tls.ca_file),
                ("certfile", &tls.cert_file),
                ("keyfile", &tls.key_file),
            ] {
                if let Some(path) = path {
                    query.push(format!("{key}={}", percent_encode(&path.to_string_lossy())));
                }
            }
            if let Some(name) = &tls.server_name {
                query.push(format!("server_name_indication={}", percent_encode(name)));
            }
        }
        if self.external {
            query.push("auth_mechanism=external".into());
        }
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        format!(
            "{}://{}{password}@{}/{vhost}{query}",
            if self.tls.is_some() { "amqps" } else { "amqp" },
            percent_encode(&self.username),
            self.address()
        )
    }
}

impl std::fmt::Debug for AmqpUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AmqpUri({:?})", self.redacted())
    }
}

impl std::fmt::Display for AmqpUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::str::FromStr for AmqpUri {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AmqpUri::parse(s)
    }
}

impl Serialize for AmqpUri {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for AmqpUri {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        AmqpUri::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Whether a URI's scheme is amqps (TLS) or amqp, and the rest of the URI after `://`.
fn split_scheme(text: &str) -> Result<(bool, &str), String> {
    let (scheme, rest) = text.split_once("://").ok_or_else(|| {
        "is not a URI; write amqp://user:password@host:5672/vhost (vhost / is %2f)".to_string()
    })?;
    let secure = match scheme.to_ascii_lowercase().as_str() {
        "amqp" => false,
        "amqps" => true,
        other => {
            return Err(format!(
                "scheme '{other}' is not amqp or amqps; write amqp://user:password@host:5672/vhost (amqps://…:5671 for TLS)"
            ))
        }
    };
    Ok((secure, rest))
}

/// User name and password of a URI's userinfo (`user:password`), percent-decoded, and
/// whether it gave a password; guest and guest without userinfo.
fn credentials(userinfo: Option<&str>) -> Result<(String, String, bool), String> {
    let Some(info) = userinfo else {
        return Ok(("guest".to_string(), "guest".to_string(), false));
    };
    let (user, pass) = match info.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (info, None),
    };
    let user = percent_decode(user).map_err(|e| format!("the user name in the URI {e}"))?;
    let pass = match pass {
        Some(p) => Some(
            percent_decode(p).map_err(|_| {
                "the password in the URI has a malformed %-escape; percent-encode special characters (e.g. @ as %40)".to_string()
            })?,
        ),
        None => None,
    };
    let has = pass.is_some();
    Ok((user, pass.unwrap_or_default(), has))
}

/// Host and port of a URI's authority (`host:port`, an IPv6 host in brackets); without a
/// port, 5671 for amqps (`secure`), else 5672.
fn host_and_port(authority: &str, secure: bool) -> Result<(String, u16), String> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("host '{authority}' has an unclosed '['"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("cannot read host and port from '{authority}'")),
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err("names no host; write amqp://user:password@host:5672/vhost".into());
    }
    let port = match port {
        None | Some("") if secure => AMQPS_DEFAULT_PORT,
        None | Some("") => AMQP_DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("port '{p}' is not a number from 1 to 65535"))?,
    };
    Ok((host, port))
}

/// The virtual host a URI's path names, percent-decoded; `/` when it names none.
fn virtual_host(path: &str) -> Result<String, String> {
    match path.strip_prefix('/') {
        None | Some("") => Ok("/".to_string()),
        Some(segment) if segment.contains('/') => Err(format!(
            "path '{path}' is not one virtual host; percent-encode '/' in a vhost name as %2f (the default vhost / is %2f)"
        )),
        Some(segment) => {
            percent_decode(segment).map_err(|e| format!("the virtual host in the URI {e}"))
        }
    }
}

/// What the query of an AMQP URI sets.
struct UriQuery {
    /// `heartbeat=N`, in seconds.
    heartbeat: Option<u16>,
    /// `cacertfile`, `certfile`, `keyfile` and `server_name_indication` (amqps:// only).
    tls: brokerbench_driver::tls::TlsSettings,
    /// `auth_mechanism=external`.
    external: bool,
}

impl UriQuery {
    /// Reads `query` (`key=value` pairs joined by `&`) of an amqps:// (`secure`) or amqp://
    /// URI, and checks that an external login has what it needs.
    fn parse(query: &str, secure: bool) -> Result<UriQuery, String> {
        let mut heartbeat = None;
        let mut tls = brokerbench_driver::tls::TlsSettings::default();
        let mut external = false;
        let tls_only = |key: &str| format!("{key} is for TLS: it goes with amqps://, not amqp://");
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = || percent_decode(value).map_err(|e| format!("{key} {e}"));
            match key {
                "heartbeat" => {
                    heartbeat = Some(value.parse::<u16>().map_err(|_| {
                        format!("heartbeat '{value}' is not a number of seconds (0 to 65535)")
                    })?)
                }
                "cacertfile" | "certfile" | "keyfile" | "server_name_indication" if !secure => {
                    return Err(tls_only(key))
                }
                "cacertfile" => tls.ca_file = Some(decoded()?.into()),
                "certfile" => tls.cert_file = Some(decoded()?.into()),
                "keyfile" => tls.key_file = Some(decoded()?.into()),
                "server_name_indication" => tls.server_name = Some(decoded()?),
                "verify" if value == "verify_peer" => {}
                "verify" => {
                    return Err(format!(
                        "verify={value} is not supported: brokerbench always verifies the broker's certificate (verify_peer); give the CA that signed it as cacertfile=…"
                    ))
                }
                "auth_mechanism" => match value.to_ascii_lowercase().as_str() {
                    "plain" => external = false,
                    "external" => external = true,
                    other => {
                        return Err(format!(
                            "auth_mechanism '{other}' is not supported: plain (user and password) or external (the client certificate, over amqps://)"
                        ))
                    }
                },
                other => {
                    return Err(format!(
                    "query parameter '{other}' is not supported; known: heartbeat, auth_mechanism, and for amqps:// cacertfile, certfile, keyfile, server_name_indication, verify"
                ))
                }
            }
        }
        if external && !secure {
            return Err("auth_mechanism=external logs in with a client certificate: use amqps:// with certfile=… and keyfile=…".into());
        }
        if external && tls.cert_file.is_none() {
            return Err("auth_mechanism=external needs a client certificate: add certfile=…&keyfile=… to the URI".into());
        }
        Ok(UriQuery {
            heartbeat,
            tls,
            external,
        })
    }
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "has a malformed %-escape".to_string())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "is not UTF-8 after %-decoding".to_string())
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
