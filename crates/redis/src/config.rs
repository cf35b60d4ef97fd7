//! The Redis driver file.

use brokerbench_driver::url::{Alone, BrokerUrl, NoUser, Scheme};
use serde::{Deserialize, Serialize};

/// Top-level Redis driver field names, for `--set` routing and did-you-mean.
pub const REDIS_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "redis_url",
    "tls",
    "max_outstanding",
    "read_count",
    "stream_prefix",
    "max_len",
    "approximate_trim",
    "appendfsync",
    "delete_streams",
    "reconnect",
];

fn default_true() -> bool {
    true
}
fn default_outstanding() -> u32 {
    1000
}
fn default_read_count() -> u32 {
    1000
}
fn default_prefix() -> String {
    "brokerbench".into()
}

/// Redis Streams, driven by brokerbench's own RESP client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisDriverConfig {
    /// `redis://[user:password@]host:port[/db]` (`rediss://` for TLS); absent means the
    /// managed local redis-server.
    #[serde(default)]
    pub redis_url: Option<RedisUrl>,
    /// TLS to the server (`rediss://` turns it on too): the CA that signed its certificate
    /// (`ca_file`; else the system's bundle), a client certificate, `server_name`.
    #[serde(default)]
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
    /// XADDs per producer in flight (sent, not yet answered) at most.
    #[serde(default = "default_outstanding")]
    pub max_outstanding: u32,
    /// Entries one XREADGROUP of a consumer asks for at most (its COUNT).
    #[serde(default = "default_read_count")]
    pub read_count: u32,
    /// Stream names start with this.
    #[serde(default = "default_prefix")]
    pub stream_prefix: String,
    /// Each XADD trims its stream to this many entries (`MAXLEN`): older entries, read or
    /// not, are discarded by the server, and brokerbench counts those never read as dropped
    /// by the broker's policy. Absent: streams grow for the whole run.
    #[serde(default)]
    pub max_len: Option<u64>,
    /// Trim with `MAXLEN ~` (whole radix-tree nodes, cheaper; a stream holds somewhat more
    /// than `max_len`) instead of exactly.
    #[serde(default)]
    pub approximate_trim: bool,
    /// The server's append-only file for the run: `always` (fsync before each reply), `everysec`
    /// or `no` (set by CONFIG SET with `appendonly yes`, and put back afterwards); absent: the
    /// server's own persistence, recorded in the manifest either way.
    #[serde(default)]
    pub appendfsync: Option<Fsync>,
    /// Delete the run's streams (and with them their consumer groups) afterwards.
    #[serde(default = "default_true")]
    pub delete_streams: bool,
    /// After a lost connection, producers and consumers connect again with backoff and go on
    /// (a consumer first reads again what its group delivered to it and it did not
    /// acknowledge); `reconnect: false` leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
}

/// Redis's `appendfsync` policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fsync {
    Always,
    Everysec,
    No,
}

impl Fsync {
    pub fn as_str(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Everysec => "everysec",
            Fsync::No => "no",
        }
    }
}

impl Default for RedisDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

impl RedisDriverConfig {
    /// Checks serde cannot make, each naming the field and the fix.
    pub fn validate(&self) -> Result<(), brokerbench_model::workload::FieldError> {
        use brokerbench_model::workload::FieldError;
        let name_ok = !self.stream_prefix.is_empty()
            && self
                .stream_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_:.".contains(c));
        if !name_ok {
            return Err(FieldError::new(
                "stream_prefix",
                format!(
                    "'{}' cannot start stream names: use letters, digits and - _ : . only",
                    self.stream_prefix
                ),
            ));
        }
        for (field, value) in [
            ("max_outstanding", self.max_outstanding),
            ("read_count", self.read_count),
        ] {
            if value == 0 {
                return Err(FieldError::new(field, "must be at least 1".to_string()));
            }
        }
        if self.max_len == Some(0) {
            return Err(FieldError::new(
                "max_len",
                "0 would discard every message at once: give the entries a stream keeps (e.g. 100000), or leave max_len out".to_string(),
            ));
        }
        if self.tls.is_some() && self.redis_url.is_none() {
            return Err(FieldError::new(
                "tls",
                "the tls: block is for a server named by redis_url: write redis_url: rediss://host:port".to_string(),
            ));
        }
        Ok(())
    }
}

/// A `redis://[user:password@]host:port[/db]` URL (`rediss://` for TLS). Debug, Display and
/// Serialize hide the password.
pub type RedisUrl = BrokerUrl<Redis>;

/// Redis's kind of URL: its path is the database number; a login of one part is a password,
/// as is `:password@` (the default user's).
pub struct Redis;

impl Scheme for Redis {
    const TYPE: &'static str = "RedisUrl";
    const PLAIN: &'static [&'static str] = &["redis"];
    const SECURE: &'static [&'static str] = &["rediss"];
    const PORTS: (u16, u16) = (6379, 6379);
    const WRITE: &'static str = "write redis://host:port (rediss://host:port for TLS)";
    const NO_HOST: &'static str = "the URL names no host; write redis://host:port";
    const ALONE: Alone = Alone::Password;
    const NO_USER: NoUser = NoUser::Password;
    /// The database.
    type Path = u32;

    fn bad_port(_port: &str) -> String {
        "what follows the host's last `:` is not a port number; write redis://[user:password@]host:port".into()
    }
    fn split(rest: &str) -> Result<(&str, u32), String> {
        let address = rest.split(['?', '#']).next().unwrap_or(rest);
        match address.split_once('/') {
            Some((a, "")) => Ok((a, 0)),
            Some((a, db)) => Ok((
                a,
                db.parse().map_err(|_| {
                    format!("'/{db}' is not a database number; write redis://host:port/0")
                })?,
            )),
            None => Ok((address, 0)),
        }
    }
    fn path_text(db: &u32) -> String {
        match db {
            0 => String::new(),
            db => format!("/{db}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_urls_and_checks() {
        let c = RedisDriverConfig::default();
        assert!(c.delete_streams && c.redis_url.is_none() && c.max_len.is_none());
        assert_eq!((c.max_outstanding, c.read_count), (1000, 1000));
        assert!(c.validate().is_ok());
        let u = RedisUrl::parse("redis://bench:s3cret@127.0.0.1:6380/2").unwrap();
        assert_eq!(
            (u.address(), u.password(), u.path),
            ("127.0.0.1:6380".into(), Some("s3cret"), 2)
        );
        // The generic redaction (Debug, Display, Serialize) is driver::url's; the family's
        // scheme shows the user and hides the password.
        assert_eq!(u.to_string(), "redis://bench:***@127.0.0.1:6380/2");
        let only_password = RedisUrl::parse("rediss://:pw@h").unwrap();
        assert_eq!(
            (only_password.user.as_deref(), only_password.password()),
            (None, Some("pw"))
        );
        assert_eq!(only_password.to_string(), "rediss://:***@h:6379");
        assert!(only_password.tls.is_some());
        assert_eq!(RedisUrl::parse("localhost").unwrap().port, 6379);
        assert!(RedisUrl::parse("tcp://h:1")
            .unwrap_err()
            .contains("redis://host:port"));
        assert!(RedisUrl::parse("redis://h:1/x")
            .unwrap_err()
            .contains("database"));
        let c: RedisDriverConfig = brokerbench_model::yaml::from_str("max_len: 0").unwrap();
        assert_eq!(c.validate().unwrap_err().field, "max_len");
        let c: RedisDriverConfig =
            brokerbench_model::yaml::from_str("appendfsync: always").unwrap();
        assert_eq!(c.appendfsync, Some(Fsync::Always));
    }
}
