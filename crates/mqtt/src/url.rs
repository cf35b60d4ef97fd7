//! A broker's URL: `mqtt://[user:password@]host:port`, `mqtts://` for TLS (and Paho's `tcp://`
//! and `ssl://`, as OpenMessaging Benchmark files write them). Debug, Display and Serialize
//! hide the password.

use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Eq)]
pub struct MqttUrl {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    password: Option<String>,
    /// Set for `mqtts://`: how the broker's certificate is trusted.
    pub tls: Option<brokerbench_driver::tls::TlsSettings>,
}

impl MqttUrl {
    pub fn parse(text: &str) -> Result<MqttUrl, String> {
        let (scheme, rest) = text.split_once("://").unwrap_or(("mqtt", text));
        let secure = match scheme {
            "mqtt" | "tcp" => false,
            "mqtts" | "ssl" | "tls" => true,
            _ => {
                return Err(format!(
                    "'{}': write mqtt://host:port (mqtts://host:port for TLS)",
                    brokerbench_model::redact::redact_uri(text)
                ))
            }
        };
        let (auth, address) = match rest.rsplit_once('@') {
            Some((auth, address)) => (Some(auth), address),
            None => (None, rest),
        };
        let address = address.split(['/', '?', '#']).next().unwrap_or(address);
        let default_port = if secure { 8883 } else { 1883 };
        let (host, port) = match address.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>().map_err(|_| {
                    "what follows the host's last `:` is not a port number; write mqtt://[user:password@]host:port".to_string()
                })?,
            ),
            None => (address, default_port),
        };
        if host.is_empty() {
            return Err("the URL names no host; write mqtt://host:port".into());
        }
        let (user, password) = match auth.map(|a| a.split_once(':')) {
            None => (None, None),
            Some(Some(("", _))) => {
                return Err(
                    "a password needs its user name: write mqtt://user:password@host:port".into(),
                )
            }
            Some(Some((u, p))) => (Some(u.to_string()), Some(p.to_string())),
            Some(None) => (auth.map(str::to_string), None),
        };
        Ok(MqttUrl {
            host: host.to_string(),
            port,
            user,
            password,
            tls: secure.then(Default::default),
        })
    }

    /// The same broker over TLS as the driver file's `tls:` block says.
    pub fn with_tls(mut self, settings: Option<&brokerbench_driver::tls::TlsSettings>) -> Self {
        if let Some(settings) = settings {
            self.tls = Some(settings.clone());
        }
        self
    }

    /// The same URL with this user and password (an OMB file's username and password).
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

    /// The URL with its password, as a driver mapping carries it (never shown).
    pub fn with_secret(&self) -> String {
        self.written(self.password.as_deref())
    }

    fn redacted(&self) -> String {
        self.written(self.password.as_ref().map(|_| "***"))
    }

    /// The URL with `password` after the user (no password without a user: `parse` refuses
    /// one).
    fn written(&self, password: Option<&str>) -> String {
        let scheme = if self.tls.is_some() { "mqtts" } else { "mqtt" };
        let login = match (&self.user, password) {
            (Some(u), Some(p)) => format!("{u}:{p}@"),
            (Some(u), None) => format!("{u}@"),
            (None, _) => String::new(),
        };
        format!("{scheme}://{login}{}", self.address())
    }
}

impl std::fmt::Debug for MqttUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MqttUrl({})", self.redacted())
    }
}

impl std::fmt::Display for MqttUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for MqttUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for MqttUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        MqttUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_hide_their_password() {
        let u = MqttUrl::parse("mqtt://bench:s3cret@127.0.0.1:1884").unwrap();
        assert_eq!(
            (u.address(), u.user.as_deref(), u.password()),
            ("127.0.0.1:1884".into(), Some("bench"), Some("s3cret"))
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
        assert_eq!(u.with_secret(), "mqtt://bench:s3cret@127.0.0.1:1884");
        let tls = MqttUrl::parse("ssl://h").unwrap();
        assert_eq!((tls.port, tls.tls.is_some()), (8883, true));
        assert_eq!(MqttUrl::parse("tcp://localhost:1883").unwrap().port, 1883);
        assert_eq!(MqttUrl::parse("localhost").unwrap().port, 1883);
        assert!(MqttUrl::parse("mqtt://:pw@h")
            .unwrap_err()
            .contains("user name"));
        assert!(MqttUrl::parse("http://h:1")
            .unwrap_err()
            .contains("mqtt://host:port"));
    }
}
