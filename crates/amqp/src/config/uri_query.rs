//! The query of an AMQP URI: the heartbeat, the TLS files and server name of amqps://, and
//! whether to log in with the client certificate (RabbitMQ's URI query parameters).

use super::percent::percent_decode;

/// What the query of an AMQP URI sets.
pub(super) struct UriQuery {
    /// `heartbeat=N`, in seconds.
    pub(super) heartbeat: Option<u16>,
    /// `cacertfile`, `certfile`, `keyfile` and `server_name_indication` (amqps:// only).
    pub(super) tls: brokerbench_driver::tls::TlsSettings,
    /// `auth_mechanism=external`.
    pub(super) external: bool,
}

impl UriQuery {
    /// Reads `query` (`key=value` pairs joined by `&`) of an amqps:// (`secure`) or amqp://
    /// URI, and checks that an external login has what it needs.
    pub(super) fn parse(query: &str, secure: bool) -> Result<UriQuery, String> {
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
