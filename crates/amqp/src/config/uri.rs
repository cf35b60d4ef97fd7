//! The AMQP URI: `amqp://user:password@host:port/vhost`, read into its parts and shown again
//! with the password hidden.

use serde::{Deserialize, Serialize};

use super::percent::{percent_decode, percent_encode};
use super::uri_query::UriQuery;

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
