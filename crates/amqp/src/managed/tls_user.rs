//! The TLS user of a node started with `--tls`: `brokerbench` with the home's password, made
//! through the management API and checked over amqps://, and the lines that tell of it.

use std::io::{self, Read};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use brokerbench_brokers::driver_file::DriverFile;
use brokerbench_brokers::tls;
use brokerbench_brokers::{managed, BrokerError};

use super::names::*;
use super::node::RabbitMq;

impl RabbitMq {
    /// Creates (or updates) the user `brokerbench` with the home's password and full rights
    /// on `/`, through the management API as guest; then checks that it logs in over
    /// amqps:// with its password (PLAIN) and with the client certificate (EXTERNAL).
    pub(super) fn add_tls_user(&self, port: u16, tls_port: u16) -> Result<(), BrokerError> {
        let files = self.tls();
        let password = files.password()?;
        let management = port + MANAGEMENT_OFFSET;
        let user = tls::USER;
        let requests = [
            (
                format!("/api/users/{user}"),
                format!("{{\"password\":\"{password}\",\"tags\":\"\"}}"),
            ),
            (
                format!("/api/permissions/%2f/{user}"),
                "{\"configure\":\".*\",\"write\":\".*\",\"read\":\".*\"}".to_string(),
            ),
        ];
        for (path, body) in &requests {
            let outcome = managed::poll(Duration::from_secs(20), || {
                match management_put(management, path, body) {
                    Ok(status) if (200..300).contains(&status) => Some(Ok(())),
                    Ok(status) if status == 401 || status == 403 => Some(Err(status)),
                    _ => None,
                }
            });
            match outcome {
                Some(Ok(())) => {}
                other => {
                    return Err(self.start_failed(format!(
                        "the management API on 127.0.0.1:{management} did not take PUT {path} ({})",
                        match other {
                            Some(Err(status)) => format!("HTTP {status} for guest"),
                            _ => "no answer within 20 s".into(),
                        }
                    )))
                }
            }
        }
        for uri in [
            self.tls_uri(tls_port, &password, false),
            self.tls_uri(tls_port, &password, true),
        ] {
            let uri = crate::config::AmqpUri::parse(&uri).map_err(|e| BrokerError::Tls {
                what: format!("the amqps:// URI of the managed node: {e}"),
            })?;
            let logged_in = managed::poll(Duration::from_secs(10), || {
                crate::probe::probe(&uri, PROBE_TIMEOUT * 3).ok()
            });
            if logged_in.is_none() {
                let error = crate::probe::probe(&uri, PROBE_TIMEOUT * 3)
                    .err()
                    .map(|e| format!("{e:?}"))
                    .unwrap_or_default();
                return Err(self.start_failed(format!(
                    "the user `{user}` could not log in over amqps:// on 127.0.0.1:{tls_port} ({}): {error}",
                    if uri.external { "EXTERNAL" } else { "PLAIN" }
                )));
            }
        }
        Ok(())
    }

    /// The amqps:// URI of the node's TLS listener: as `brokerbench` with its password, or
    /// (`external`) with the client certificate.
    pub(super) fn tls_uri(&self, tls_port: u16, password: &str, external: bool) -> String {
        let files = self.tls();
        let encode = |path: PathBuf| path.display().to_string().replace('%', "%25");
        if external {
            format!(
                "amqps://127.0.0.1:{tls_port}/%2f?cacertfile={}&certfile={}&keyfile={}&auth_mechanism=external",
                encode(files.ca()),
                encode(files.client_certificate()),
                encode(files.client_key())
            )
        } else {
            format!(
                "amqps://{}:{password}@127.0.0.1:{tls_port}/%2f?cacertfile={}",
                tls::USER,
                encode(files.ca())
            )
        }
    }

    /// Lines `up` and `status` print about the TLS listener of the running node.
    pub(super) fn tls_lines(&self) -> Vec<String> {
        let Some(tls_port) = self.running_tls_port() else {
            return Vec::new();
        };
        let url = format!("amqps://127.0.0.1:{tls_port}");
        let login = format!(
            "PLAIN as user `{}`, or EXTERNAL with the client certificate",
            tls::USER
        );
        let file = DriverFile { name: NAME };
        file.tls_endpoints(&url, &login, &self.tls(), "password")
            .to_vec()
    }
}

/// `PUT path` with a JSON body to the management API on 127.0.0.1:`port` as guest; the HTTP
/// status.
fn management_put(port: u16, path: &str, body: &str) -> io::Result<u16> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic {GUEST_BASIC_AUTH}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| io::Error::other("not an HTTP answer"))
}
