//! Reading a metrics endpoint over HTTP or HTTPS with `ureq`: the system's CAs or a given CA
//! file, basic auth or a bearer token, gzip, redirects and one timeout for the whole request.
//! Credentials never reach a URL that is printed: [`Endpoint::url`] has no user info, and
//! every error names that URL.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;

pub use brokerbench_model::ca_bundle::system_ca_bundle;

/// Environment variables that supply what a driver file does not say.
pub const ENV_USERNAME: &str = "BROKERBENCH_METRICS_USERNAME";
pub const ENV_PASSWORD: &str = "BROKERBENCH_METRICS_PASSWORD";
pub const ENV_BEARER_TOKEN: &str = "BROKERBENCH_METRICS_BEARER_TOKEN";
pub const ENV_CA_FILE: &str = "BROKERBENCH_METRICS_CA_FILE";

/// Why a scrape failed. Every message names the endpoint without its credentials.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("'{url}': the URL must start with {expected}")]
    Url { url: String, expected: String },
    #[error("the metrics CA file {path}: {message}")]
    Ca { path: String, message: String },
    #[error("scraping {url}: {message}")]
    Request { url: String, message: String },
    #[error("scraping {url}: HTTP status {status}{hint}")]
    Status {
        url: String,
        status: String,
        hint: &'static str,
    },
    #[error("scraping {url}: {message}")]
    Format { url: String, message: String },
}

/// How requests to the endpoint authenticate. Debug never shows the secret.
#[derive(Clone, Default, PartialEq)]
pub enum Auth {
    #[default]
    None,
    Basic {
        username: String,
        password: String,
    },
    Bearer(String),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => write!(f, "None"),
            Auth::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
            Auth::Bearer(_) => write!(f, "Bearer(***)"),
        }
    }
}

/// What one source of settings (a driver file, the environment) says about an endpoint.
#[derive(Default)]
pub struct EndpointSettings {
    pub username: Option<String>,
    pub password: Option<String>,
    pub bearer_token: Option<String>,
    pub ca_file: Option<PathBuf>,
}

/// A URL that is not one of `schemes`, named without its credentials.
fn bad_url(url: &str, schemes: &[&str]) -> ScrapeError {
    let expected: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
    ScrapeError::Url {
        url: brokerbench_redacted(url),
        expected: expected.join(" or "),
    }
}

/// The schemes of an endpoint read over HTTP.
pub const HTTP_SCHEMES: &[&str] = &["http", "https"];

/// A metrics endpoint: its URL (without credentials), how to authenticate, which CAs to
/// trust and how long one request may take.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    url: String,
    auth: Auth,
    ca_file: Option<PathBuf>,
    timeout: Duration,
}

impl Endpoint {
    /// An endpoint from an http(s) URL; `user:password@` in it becomes basic auth
    /// (percent-encoded characters decoded) and is removed from the URL.
    pub fn new(url: &str) -> Result<Endpoint, ScrapeError> {
        Endpoint::with_schemes(url, HTTP_SCHEMES)
    }

    /// [`Endpoint::new`] for a URL of one of `schemes` (a broker format's, see
    /// [`crate::Format::schemes`]).
    pub fn with_schemes(url: &str, schemes: &[&str]) -> Result<Endpoint, ScrapeError> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad_url(url, schemes));
        };
        if !schemes.contains(&scheme.to_ascii_lowercase().as_str()) {
            return Err(bad_url(url, schemes));
        }
        // User info ends at the last '@' before the path: a raw '?', '#' or '@' may be in a
        // password, so it is taken out before the host is split from the rest.
        let slash = rest.find('/').unwrap_or(rest.len());
        let (userinfo, rest) = match rest[..slash].rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (host, tail) = rest.split_at(authority_end);
        if host.is_empty() {
            return Err(bad_url(url, schemes));
        }
        let auth = match userinfo {
            Some(info) => {
                let (user, password) = info.split_once(':').unwrap_or((info, ""));
                Auth::Basic {
                    username: percent_decode(user),
                    password: percent_decode(password),
                }
            }
            None => Auth::None,
        };
        Ok(Endpoint {
            url: format!("{scheme}://{host}{tail}"),
            auth,
            ca_file: None,
            timeout: Duration::from_secs(2),
        })
    }

    /// Basic auth with this user and password.
    pub fn basic_auth(mut self, username: &str, password: &str) -> Self {
        self.auth = Auth::Basic {
            username: username.into(),
            password: password.into(),
        };
        self
    }

    /// `Authorization: Bearer TOKEN`.
    pub fn bearer_token(mut self, token: &str) -> Self {
        self.auth = Auth::Bearer(token.trim().into());
        self
    }

    /// Trust only the CAs in this PEM file (instead of the system's).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// The longest one request may take, connection and body included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Fills in what is not set yet from what `given` supplies: a user without a password
    /// takes the given password; with no credentials at all, the given bearer token or user
    /// and password are used; the CA file if none is set. Called with the driver file's
    /// settings, then the environment's, it makes the URL win over the file and the file
    /// over the environment.
    pub fn fill_missing(mut self, given: EndpointSettings) -> Self {
        if let (Auth::Basic { password, .. }, Some(given)) = (&mut self.auth, &given.password) {
            if password.is_empty() {
                password.clone_from(given);
            }
        }
        if self.auth == Auth::None {
            if let Some(token) = &given.bearer_token {
                self = self.bearer_token(token);
            } else if let Some(username) = &given.username {
                self = self.basic_auth(username, given.password.as_deref().unwrap_or_default());
            }
        }
        if self.ca_file.is_none() {
            self.ca_file = given.ca_file;
        }
        self
    }

    /// [`fill_missing`](Self::fill_missing) from `BROKERBENCH_METRICS_USERNAME`,
    /// `…_PASSWORD`, `…_BEARER_TOKEN` and `…_CA_FILE`.
    pub fn with_environment(self) -> Self {
        self.with_variables(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    fn with_variables(self, var: impl Fn(&str) -> Option<String>) -> Self {
        self.fill_missing(EndpointSettings {
            username: var(ENV_USERNAME),
            password: var(ENV_PASSWORD),
            bearer_token: var(ENV_BEARER_TOKEN),
            ca_file: var(ENV_CA_FILE).map(PathBuf::from),
        })
    }

    /// The URL without credentials: safe to print and to write into results.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA file the endpoint's certificate is checked against, when one was given.
    pub fn ca(&self) -> Option<&std::path::Path> {
        self.ca_file.as_deref()
    }

    /// How long one request may take.
    pub fn request_timeout(&self) -> Duration {
        self.timeout
    }

    /// How requests authenticate.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// Whether the URL names a path (`http://h:9404` does not).
    pub fn has_path(&self) -> bool {
        let rest = self.url.split_once("://").map_or("", |(_, r)| r);
        rest.find('/').is_some_and(|i| i + 1 < rest.len())
    }

    /// The same endpoint at another path (`/jsz?…` beside `/varz`).
    pub fn join(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches('/'))
    }
}

/// Reads an endpoint repeatedly over one connection pool.
#[derive(Debug, Clone)]
pub struct Scraper {
    endpoint: Endpoint,
    agent: ureq::Agent,
}

impl Scraper {
    /// Prepares requests to `endpoint`: reads the CA file (the given one, else the system's
    /// bundle, else Mozilla's roots compiled in), so a bad file fails here, before a run.
    pub fn new(endpoint: Endpoint) -> Result<Scraper, ScrapeError> {
        // The roots are set whatever the scheme: an http endpoint may redirect to https.
        let mut tls = ureq::tls::TlsConfig::builder();
        let bundle = match &endpoint.ca_file {
            Some(path) => Some(path.clone()),
            None => system_ca_bundle(),
        };
        if let Some(path) = bundle {
            tls = tls.root_certs(read_certificates(&path)?);
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(endpoint.timeout))
            .http_status_as_error(false)
            // Never through an http proxy from the environment: a managed broker is on
            // loopback, and basic auth must not cross a proxy in clear.
            .proxy(None)
            .max_redirects(5)
            // A bearer token or password follows a redirect only to the same host.
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .user_agent(concat!("brokerbench/", env!("CARGO_PKG_VERSION")))
            .accept("text/plain;version=0.0.4;q=0.9, application/json;q=0.8, */*;q=0.1")
            .tls_config(tls.build())
            .build();
        Ok(Scraper {
            endpoint,
            agent: config.into(),
        })
    }

    /// The endpoint read.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The body at the endpoint's URL.
    pub fn fetch(&self) -> Result<String, ScrapeError> {
        self.fetch_url(&self.endpoint.url)
    }

    /// The body at `url`, a URL of the same endpoint (see [`Endpoint::join`]), with the
    /// endpoint's credentials.
    pub fn fetch_url(&self, url: &str) -> Result<String, ScrapeError> {
        let mut request = self.agent.get(url);
        match &self.endpoint.auth {
            Auth::None => {}
            Auth::Basic { username, password } => {
                let encoded = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                request = request.header("Authorization", format!("Basic {encoded}"));
            }
            Auth::Bearer(token) => {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
        }
        let failed = |message: String| ScrapeError::Request {
            url: url.to_string(),
            message,
        };
        let mut response = request.call().map_err(|e| failed(describe(&e)))?;
        let status = response.status();
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 | 403 => "; give the endpoint's credentials: broker_metrics.username and password, or bearer_token, in the driver file (or BROKERBENCH_METRICS_USERNAME/PASSWORD/BEARER_TOKEN)",
                404 => "; check the path, e.g. /metrics",
                _ => "",
            };
            return Err(ScrapeError::Status {
                url: url.to_string(),
                status: format!(
                    "{} {}",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or_default()
                )
                .trim_end()
                .to_string(),
                hint,
            });
        }
        response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| failed(describe(&e)))
    }
}

/// Fetches the body at `url` once (credentials in the URL become basic auth).
pub fn scrape(url: &str, timeout: Duration) -> Result<String, ScrapeError> {
    Scraper::new(Endpoint::new(url)?.timeout(timeout))?.fetch()
}

/// A transport error in words a user can act on.
fn describe(error: &ureq::Error) -> String {
    let text = match error {
        ureq::Error::Timeout(_) => "no answer within the timeout".into(),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection refused or unreachable".into(),
        ureq::Error::TooManyRedirects => "more than 5 redirects".into(),
        other => other.to_string(),
    };
    if text.contains("UnknownIssuer") || text.contains("invalid peer certificate") {
        format!("{text}: the server's certificate is not trusted; give its CA as broker_metrics.ca_file in the driver file (or BROKERBENCH_METRICS_CA_FILE)")
    } else {
        text
    }
}

fn read_certificates(path: &Path) -> Result<ureq::tls::RootCerts, ScrapeError> {
    let failed = |message: String| ScrapeError::Ca {
        path: path.display().to_string(),
        message,
    };
    let pem = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
    let mut certificates = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let ureq::tls::PemItem::Certificate(c) = item.map_err(|e| failed(e.to_string()))? {
            certificates.push(c);
        }
    }
    if certificates.is_empty() {
        return Err(failed(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(ureq::tls::RootCerts::new_with_certs(&certificates))
}

/// `%40` → `@` in the user info of a URL.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The URL with any password replaced, for an error about a URL that could not be parsed.
fn brokerbench_redacted(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..end].rfind('@') {
                Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests;
