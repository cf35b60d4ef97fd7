//! TLS for the families' own clients (AMQP's `amqps://`, and any other that speaks over a
//! `TcpStream`), with rustls.
//!
//! [`connect`] does the handshake on the broker's socket — so a certificate the client cannot
//! verify, or a client certificate the broker refuses, is an error of the connection attempt,
//! with rustls's reason — and hands back a loopback socket that speaks plain text: two threads
//! carry the bytes between it and the broker, encrypting what the client writes and
//! decrypting what the broker sends. The client's own frame path (non-blocking sends, its
//! reader thread or readers in turn, `poll(2)` on the socket) stays exactly as it is without
//! TLS; the price is a copy and a wake-up of a pump thread per burst in each direction,
//! which a run over TLS measures as client CPU.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// How a client connects over TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// The CAs that may sign the broker's certificate (PEM); None: the system's bundle.
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM) and its private key, for brokers that ask for one (and for
    /// SASL EXTERNAL, which logs in as the certificate's subject).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The name the broker's certificate must hold; None: the host connected to.
    pub server_name: Option<String>,
}

/// Why a TLS connection could not be made. Messages name files and hosts, never key material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file of the settings is missing, unreadable or holds no usable PEM item.
    #[error("{path}: {message}")]
    File { path: String, message: String },
    /// The handshake failed: rustls's reason, and what kind of failure it is (for the
    /// caller's hint, which names its own settings).
    #[error("the TLS handshake with {host} failed: {reason}")]
    Handshake {
        host: String,
        reason: String,
        failure: Failure,
    },
    /// Anything else of the socket.
    #[error("TLS with {host}: {source}")]
    Io {
        host: String,
        #[source]
        source: io::Error,
    },
}

/// What kind of handshake failure it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The broker's certificate is not signed by a trusted CA, or does not name the host.
    UntrustedCertificate,
    /// The broker wants a client certificate it trusts.
    ClientCertificate,
    /// The port does not speak TLS.
    NotTls,
    /// No answer in time.
    Timeout,
    Other,
}

impl TlsError {
    /// The error and, for a handshake failure, what to check (see [`TlsError::hint`]).
    pub fn with_hint(&self, ca_setting: &str, client_setting: &str) -> String {
        match self.hint(ca_setting, client_setting) {
            hint if hint.is_empty() => self.to_string(),
            hint => format!("{self}; {hint}"),
        }
    }

    /// What to check, for a handshake failure: the CA (`ca_setting`), the client certificate
    /// (`client_setting`), or the port; empty for other errors.
    pub fn hint(&self, ca_setting: &str, client_setting: &str) -> String {
        match self {
            TlsError::Handshake { failure, .. } => match failure {
                Failure::UntrustedCertificate => format!("the broker's certificate is not signed by a CA the client trusts, or does not name the host connected to: give the CA that signed it ({ca_setting}) and connect to a name the certificate holds"),
                Failure::ClientCertificate => format!("the broker wants a client certificate it trusts ({client_setting})"),
                Failure::NotTls => "the port does not speak TLS: use the broker's TLS port".into(),
                Failure::Timeout => "is it a TLS listener?".into(),
                Failure::Other => String::new(),
            },
            _ => String::new(),
        }
    }
}

impl TlsSettings {
    /// The rustls configuration: roots from `ca_file` (else the system's bundle) and the
    /// client certificate when one is given. Reads every file now, so a bad one fails before
    /// a run.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::File {
                path: "(rustls)".into(),
                message: e.to_string(),
            })?;
        let bundle = match &self.ca_file {
            Some(path) => path.clone(),
            None => brokerbench_model::ca_bundle::system_ca_bundle().ok_or_else(|| {
                TlsError::File {
                path: "the system's CA bundle".into(),
                message:
                    "there is none on this system: give the CA that signed the broker's certificate"
                        .into(),
            }
            })?,
        };
        let mut roots = RootCertStore::empty();
        for certificate in read_certificates(&bundle)? {
            roots.add(certificate).map_err(|e| TlsError::File {
                path: bundle.display().to_string(),
                message: format!("a certificate rustls cannot use: {e}"),
            })?;
        }
        let builder = builder.with_root_certificates(roots);
        let config = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                let chain = read_certificates(cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
                    path: key.display().to_string(),
                    message: format!("no PEM private key ({e})"),
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| TlsError::File {
                        path: cert.display().to_string(),
                        message: format!("the certificate and key do not go together: {e}"),
                    })?
            }
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), None) | (None, Some(cert)) => {
                return Err(TlsError::File {
                    path: cert.display().to_string(),
                    message: "a client certificate needs both certfile and keyfile".into(),
                })
            }
        };
        Ok(Arc::new(config))
    }
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let failed = |message: String| TlsError::File {
        path: path.display().to_string(),
        message,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| failed(format!("cannot read it ({e})")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(format!("not PEM ({e})")))?;
    if certificates.is_empty() {
        return Err(failed(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certificates)
}

/// Does the TLS handshake on `tcp` (connected to `host`) before `deadline`, then returns a
/// loopback socket that carries the connection in plain text (see the module's notes).
pub fn connect(
    mut tcp: TcpStream,
    config: Arc<ClientConfig>,
    host: &str,
    server_name: Option<&str>,
    deadline: Instant,
) -> Result<TcpStream, TlsError> {
    let io_error = |source: io::Error| TlsError::Io {
        host: host.to_string(),
        source,
    };
    let name_text = server_name.unwrap_or(host).to_string();
    let name = ServerName::try_from(name_text.clone()).map_err(|_| TlsError::Handshake {
        host: host.to_string(),
        reason: format!("'{name_text}' is not a host name or IP address"),
        failure: Failure::Other,
    })?;
    let mut connection = ClientConnection::new(config, name).map_err(|e| TlsError::Handshake {
        host: host.to_string(),
        reason: e.to_string(),
        failure: Failure::Other,
    })?;
    while connection.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TlsError::Handshake {
                host: host.to_string(),
                reason: "no answer to the handshake in time".into(),
                failure: Failure::Timeout,
            });
        }
        tcp.set_read_timeout(Some(left)).map_err(io_error)?;
        tcp.set_write_timeout(Some(left)).map_err(io_error)?;
        if let Err(e) = connection.complete_io(&mut tcp) {
            return Err(handshake_error(host, e));
        }
    }
    // TLS 1.3 servers may refuse a client certificate only after the handshake: their alert
    // arrives with the first reply, and the client sees the connection end then.
    tcp.set_read_timeout(None).map_err(io_error)?;
    tcp.set_write_timeout(None).map_err(io_error)?;
    let _ = tcp.set_nodelay(true);
    let (inner, outer) = loopback_pair().map_err(io_error)?;
    let _ = inner.set_nodelay(true);
    let _ = outer.set_nodelay(true);
    start_pumps(tcp, connection, outer).map_err(io_error)?;
    Ok(inner)
}

fn handshake_error(host: &str, error: io::Error) -> TlsError {
    let reason = match error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        Some(tls) => tls.to_string(),
        None => error.to_string(),
    };
    let failure = if reason.contains("invalid peer certificate") {
        Failure::UntrustedCertificate
    } else if reason.contains("CertificateRequired") || reason.contains("BadCertificate") {
        Failure::ClientCertificate
    } else if reason.contains("corrupt message") || reason.contains("InvalidContentType") {
        Failure::NotTls
    } else {
        Failure::Other
    };
    TlsError::Handshake {
        host: host.to_string(),
        reason,
        failure,
    }
}

/// Two connected loopback TCP sockets (the listener accepts only its own peer).
fn loopback_pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    let inner = TcpStream::connect(listener.local_addr()?)?;
    loop {
        let (outer, from) = listener.accept()?;
        if from == inner.local_addr()? {
            return Ok((inner, outer));
        }
    }
}

/// What both pump threads share: the TLS state, and the order of writes to the broker.
struct Pump {
    connection: Mutex<ClientConnection>,
    /// Held while TLS records are made and written, so they reach the broker in the order
    /// they were made whichever thread made them.
    to_broker: Mutex<TcpStream>,
}

impl Pump {
    /// Writes what TLS has to send (records of `plain`, alerts, key updates) to the broker.
    fn send(&self, plain: &[u8]) -> io::Result<()> {
        let mut socket = self.to_broker.lock().unwrap_or_else(|e| e.into_inner());
        let mut records = Vec::with_capacity(plain.len() + 64);
        {
            let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
            if !plain.is_empty() {
                connection.writer().write_all(plain)?;
            }
            while connection.wants_write() {
                connection.write_tls(&mut records)?;
            }
        }
        socket.write_all(&records)
    }

    /// Ends the connection to the broker: close_notify, then both directions.
    fn close(&self) {
        {
            let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
            connection.send_close_notify();
        }
        let _ = self.send(&[]);
        let socket = self.to_broker.lock().unwrap_or_else(|e| e.into_inner());
        let _ = socket.shutdown(Shutdown::Both);
    }

    /// Takes the broker's TLS `records` and appends the plain text they carry to `plain`;
    /// returns whether TLS owes the broker a reply (alerts, key updates), or None on a bad
    /// record or the broker's fatal alert.
    fn decrypt(&self, mut records: &[u8], plain: &mut Vec<u8>) -> Option<bool> {
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        while !records.is_empty() {
            if connection.read_tls(&mut records).is_err()
                || connection.process_new_packets().is_err()
            {
                // A bad record or the broker's fatal alert: the connection ends.
                return None;
            }
            loop {
                let start = plain.len();
                plain.resize(start + 16 * 1024, 0);
                match connection.reader().read(&mut plain[start..]) {
                    Ok(0) => {
                        plain.truncate(start);
                        break;
                    }
                    Ok(read) => plain.truncate(start + read),
                    Err(_) => {
                        plain.truncate(start);
                        break;
                    }
                }
            }
        }
        Some(connection.wants_write())
    }
}

fn start_pumps(tcp: TcpStream, connection: ClientConnection, outer: TcpStream) -> io::Result<()> {
    let from_broker = tcp.try_clone()?;
    let from_client = outer.try_clone()?;
    let to_client = outer;
    let pump = Arc::new(Pump {
        connection: Mutex::new(connection),
        to_broker: Mutex::new(tcp),
    });
    let up = pump.clone();
    std::thread::Builder::new()
        .name("tls-up".into())
        .spawn(move || pump_up(&up, from_client))?;
    std::thread::Builder::new()
        .name("tls-down".into())
        .spawn(move || pump_down(&pump, from_broker, to_client))?;
    Ok(())
}

/// Carries what the client writes to the broker, encrypted, until either side ends; then
/// ends the TLS connection and the client's socket.
fn pump_up(pump: &Pump, mut from_client: TcpStream) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from_client.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if pump.send(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    pump.close();
    let _ = from_client.shutdown(Shutdown::Both);
}

/// Carries what the broker sends to the client, decrypted, with the replies TLS owes the
/// broker, until either side ends; then ends both sockets.
fn pump_down(pump: &Pump, mut from_broker: TcpStream, mut to_client: TcpStream) {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut plain = Vec::with_capacity(64 * 1024);
    loop {
        let n = match from_broker.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let Some(owes_a_reply) = pump.decrypt(&buffer[..n], &mut plain) else {
            break;
        };
        if owes_a_reply && pump.send(&[]).is_err() {
            break;
        }
        if !plain.is_empty() {
            if to_client.write_all(&plain).is_err() {
                break;
            }
            plain.clear();
        }
    }
    // The client sees the connection end as it would without TLS.
    let _ = to_client.shutdown(Shutdown::Both);
    let socket = pump.to_broker.lock().unwrap_or_else(|e| e.into_inner());
    let _ = socket.shutdown(Shutdown::Both);
}
