//! The Redis driver file.

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

/// A `redis://[user:password@]host:port[/db]` URL. Debug, Display and Serialize hide the
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    password: Option<String>,
    pub db: u32,
    /// Set for `rediss://`: how the server's certificate is trusted.
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
}

impl RedisUrl {
    pub fn parse(text: &str) -> Result<RedisUrl, String> {
        let (secure, rest) = match (
            text.strip_prefix("redis://"),
            text.strip_prefix("rediss://"),
        ) {
            (Some(rest), _) => (false, rest),
            (_, Some(rest)) => (true, rest),
            _ if text.contains("://") => {
                return Err(format!(
                    "'{}': write redis://host:port (rediss://host:port for TLS)",
                    brokerbench_model::redact::redact_uri(text)
                ))
            }
            _ => (false, text),
        };
        let (auth, address) = match rest.rsplit_once('@') {
            Some((auth, address)) => (Some(auth), address),
            None => (None, rest),
        };
        let address = address.split(['?', '#']).next().unwrap_or(address);
        let (address, db) = match address.split_once('/') {
            Some((a, "")) => (a, 0),
            Some((a, db)) => (
                a,
                db.parse().map_err(|_| {
                    format!("'/{db}' is not a database number; write redis://host:port/0")
                })?,
            ),
            None => (address, 0),
        };
        let (host, port) = match address.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>().map_err(|_| {
                    "what follows the host's last `:` is not a port number; write redis://[user:password@]host:port".to_string()
                })?,
            ),
            None => (address, 6379),
        };
        if host.is_empty() {
            return Err("the URL names no host; write redis://host:port".into());
        }
        // `redis://:password@host` is a password without a user (the default user).
        let (user, password) = match auth.map(|a| a.split_once(':')) {
            None => (None, None),
            Some(Some(("", p))) => (None, Some(p.to_string())),
            Some(Some((u, p))) => (Some(u.to_string()), Some(p.to_string())),
            Some(None) => (None, auth.map(str::to_string)),
        };
        Ok(RedisUrl {
            host: host.to_string(),
            port,
            user,
            password,
            db,
            tls: secure.then(Default::default),
        })
    }

    /// The same server over TLS as the driver file's `tls:` block says.
    pub fn with_tls(mut self, settings: Option<&brokerbench_driver::tls::TlsSettings>) -> Self {
        if let Some(settings) = settings {
            self.tls = Some(settings.clone());
        }
        self
    }

    /// The same URL with this user and password (an OMB file's `redisUser`, `redisPass`).
    pub fn with_login(mut self, user: Option<String>, password: Option<String>) -> Self {
        self.user = user;
        self.password = password;
        self
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    fn redacted(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        let login = match (&self.user, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (None, Some(_)) => ":***@".to_string(),
            (Some(u), None) => format!("{u}@"),
            (None, None) => String::new(),
        };
        let db = if self.db == 0 {
            String::new()
        } else {
            format!("/{}", self.db)
        };
        format!("{scheme}://{login}{}{db}", self.address())
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedisUrl({})", self.redacted())
    }
}

impl std::fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for RedisUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for RedisUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        RedisUrl::parse(&text).map_err(serde::de::Error::custom)
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
            (u.address(), u.password(), u.db),
            ("127.0.0.1:6380".into(), Some("s3cret"), 2)
        );
        for shown in [
            format!("{u:?}"),
            u.to_string(),
            serde_json::to_string(&u).unwrap(),
        ] {
            assert!(
                !shown.contains("s3cret") && shown.contains("bench:***@"),
                "{shown}"
            );
        }
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
