//! A broker's URL, `scheme://[user[:password]@]host[:port]…`, whose password Debug, Display
//! and Serialize never show. What differs between families is data in a [`Scheme`]: the
//! schemes read and written, the ports without one written, the texts of the errors, what a
//! login of one part means and what may follow the address.

use std::marker::PhantomData;

use serde::{Deserialize, Serialize};

use crate::tls::TlsSettings;

/// A family's kind of URL.
pub trait Scheme: 'static {
    /// How Debug names the URL type, e.g. `MqttUrl`.
    const TYPE: &'static str;
    /// The schemes read as plain TCP; the first is how such a URL is written. A URL with no
    /// scheme is a plain one.
    const PLAIN: &'static [&'static str];
    /// The schemes read as TLS; the first is how such a URL is written.
    const SECURE: &'static [&'static str];
    /// The port when none is written: plain, and over TLS.
    const PORTS: (u16, u16);
    /// Told after the quoted URL when its scheme is none of these: `write …`.
    const WRITE: &'static str;
    /// Told when the URL names no host.
    const NO_HOST: &'static str;
    /// What a login with no `:` is.
    const ALONE: Alone = Alone::User;
    /// What a login with an empty user (`:password@`) is.
    const NO_USER: NoUser = NoUser::Kept;
    /// What the scheme keeps of what follows `host:port`.
    type Path: Clone + PartialEq + Eq;

    /// Told when what follows the host's last `:` (`port`) is not a port number.
    fn bad_port(port: &str) -> String;
    /// What follows the login, split into the address (`host[:port]`) and the path kept.
    fn split(rest: &str) -> Result<(&str, Self::Path), String>;
    /// The path as it is written after the address.
    fn path_text(path: &Self::Path) -> String;
    /// Whether what follows the login asks for TLS beyond the scheme (a query option).
    fn asks_tls(rest: &str) -> bool {
        let _ = rest;
        false
    }
}

/// A login of one part, `name@`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alone {
    /// A user name, shown.
    User,
    /// A token, kept as the user and never shown.
    Token,
    /// A password.
    Password,
}

/// A login with an empty user, `:password@`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoUser {
    /// Kept: an empty user name and the password.
    Kept,
    /// A password for the server's default user.
    Password,
    /// Refused with this text.
    Refused(&'static str),
}

/// A broker's URL of the kind `S`.
pub struct BrokerUrl<S: Scheme> {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    password: Option<String>,
    /// Set for a TLS scheme (or by the driver file's `tls:` block): how the broker's
    /// certificate is trusted.
    pub tls: Option<TlsSettings>,
    /// What the scheme keeps of what follows the address.
    pub path: S::Path,
    scheme: PhantomData<fn() -> S>,
}

impl<S: Scheme> BrokerUrl<S> {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (scheme, rest) = text.split_once("://").unwrap_or((S::PLAIN[0], text));
        let secure = match scheme {
            s if S::PLAIN.contains(&s) => false,
            s if S::SECURE.contains(&s) => true,
            _ => {
                let shown = brokerbench_model::redact::redact_uri(text);
                return Err(format!("'{shown}': {}", S::WRITE));
            }
        };
        let (auth, after) = match rest.rsplit_once('@') {
            Some((auth, after)) => (Some(auth), after),
            None => (None, rest),
        };
        let secure = secure || S::asks_tls(after);
        let (address, path) = S::split(after)?;
        let (host, port) = match address.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| S::bad_port(p))?),
            None if secure => (address, S::PORTS.1),
            None => (address, S::PORTS.0),
        };
        if host.is_empty() {
            return Err(S::NO_HOST.into());
        }
        let (user, password) = login::<S>(auth)?;
        Ok(BrokerUrl {
            host: host.to_string(),
            port,
            user,
            password,
            tls: secure.then(Default::default),
            path,
            scheme: PhantomData,
        })
    }

    /// The same broker over TLS as the driver file's `tls:` block says (which turns TLS on
    /// for a plain URL too).
    pub fn with_tls(mut self, settings: Option<&TlsSettings>) -> Self {
        if let Some(settings) = settings {
            self.tls = Some(settings.clone());
        }
        self
    }

    /// The same URL with this user and password (an OMB driver file's).
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
        let login = match (&self.user, &self.password) {
            (Some(u), Some(p)) => format!("{u}:{p}@"),
            // A scheme that refuses a password without its user writes none.
            (None, Some(_)) if matches!(S::NO_USER, NoUser::Refused(_)) => String::new(),
            (None, Some(p)) => format!(":{p}@"),
            (Some(u), None) => format!("{u}@"),
            (None, None) => String::new(),
        };
        self.written(&login)
    }

    fn redacted(&self) -> String {
        let login = match (&self.user, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (None, Some(_)) => ":***@".to_string(),
            (Some(_), None) if S::ALONE == Alone::Token => "***@".to_string(),
            (Some(u), None) => format!("{u}@"),
            (None, None) => String::new(),
        };
        self.written(&login)
    }

    fn written(&self, login: &str) -> String {
        let scheme = if self.tls.is_some() {
            S::SECURE[0]
        } else {
            S::PLAIN[0]
        };
        let path = S::path_text(&self.path);
        format!("{scheme}://{login}{}{path}", self.address())
    }
}

/// The user and password of a login (`auth`, before the `@`), as the scheme reads them.
fn login<S: Scheme>(auth: Option<&str>) -> Result<(Option<String>, Option<String>), String> {
    let owned = |s: &str| Some(s.to_string());
    Ok(match auth.map(|a| (a, a.split_once(':'))) {
        None => (None, None),
        Some((_, Some(("", p)))) => match S::NO_USER {
            NoUser::Kept => (owned(""), owned(p)),
            NoUser::Password => (None, owned(p)),
            NoUser::Refused(text) => return Err(text.into()),
        },
        Some((_, Some((u, p)))) => (owned(u), owned(p)),
        Some((a, None)) if S::ALONE == Alone::Password => (None, owned(a)),
        Some((a, None)) => (owned(a), None),
    })
}

impl<S: Scheme> Clone for BrokerUrl<S> {
    fn clone(&self) -> Self {
        BrokerUrl {
            host: self.host.clone(),
            port: self.port,
            user: self.user.clone(),
            password: self.password.clone(),
            tls: self.tls.clone(),
            path: self.path.clone(),
            scheme: PhantomData,
        }
    }
}

impl<S: Scheme> PartialEq for BrokerUrl<S> {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.host,
            self.port,
            &self.user,
            &self.password,
            &self.tls,
            &self.path,
        ) == (
            &other.host,
            other.port,
            &other.user,
            &other.password,
            &other.tls,
            &other.path,
        )
    }
}

impl<S: Scheme> Eq for BrokerUrl<S> {}

impl<S: Scheme> std::fmt::Debug for BrokerUrl<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", S::TYPE, self.redacted())
    }
}

impl<S: Scheme> std::fmt::Display for BrokerUrl<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl<S: Scheme> Serialize for BrokerUrl<S> {
    fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl<'de, S: Scheme> Deserialize<'de> for BrokerUrl<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        BrokerUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
