//! A managed broker's TLS and SASL material (`brokerbench broker up FAMILY --tls`): a
//! throwaway certificate authority, a server certificate for 127.0.0.1 and `localhost` signed
//! by it, a client certificate (for mutual TLS and SASL EXTERNAL), and the SASL user's
//! password — generated once into `<broker dir>/tls/` and kept there, so clients configured
//! against them keep working across restarts.
//!
//! Layout of `<broker dir>/tls/`:
//!
//! ```text
//! ca.pem             the CA's certificate: what clients trust (ssl.ca.location, cacertfile)
//! ca-key.pem         the CA's private key (0600), kept to sign further certificates
//! server.pem         the server certificate
//! server-key.pem     its private key, PKCS#8 (0600)
//! client.pem         a client certificate, common name `brokerbench`
//! client-key.pem     its private key, PKCS#8 (0600)
//! password           the SASL user's password (0600)
//! ```
//!
//! Whether the broker starts with its TLS listeners is kept beside them: `enabled` exists
//! while TLS is on, so every later `up` of this home (a restart in a fault test, a run that
//! starts the broker) keeps the listeners the user asked for until `up --no-tls`.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::BrokerError;

/// The SASL user a managed broker with TLS accepts.
pub const USER: &str = "brokerbench";

/// Names the server certificate holds: what clients of a managed broker connect to.
const SERVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// The TLS material of one managed broker, in `<broker dir>/tls/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    dir: PathBuf,
}

impl TlsFiles {
    /// The material of the broker kept in `broker_dir` (e.g. `<home>/kafka`).
    pub fn of(broker_dir: &Path) -> Self {
        TlsFiles {
            dir: broker_dir.join("tls"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate clients must trust.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    pub fn server_certificate(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    pub fn server_key(&self) -> PathBuf {
        self.dir.join("server-key.pem")
    }

    pub fn client_certificate(&self) -> PathBuf {
        self.dir.join("client.pem")
    }

    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client-key.pem")
    }

    fn password_file(&self) -> PathBuf {
        self.dir.join("password")
    }

    fn enabled_marker(&self) -> PathBuf {
        self.dir.join("enabled")
    }

    /// Whether the broker starts with its TLS listeners.
    pub fn enabled(&self) -> bool {
        self.enabled_marker().is_file()
    }

    /// Turns the TLS listeners on for later starts (generating the material the first time)
    /// or off (the material stays, so clients configured against it work again later).
    pub fn set_enabled(&self, on: bool) -> Result<(), BrokerError> {
        if on {
            self.generate_once()?;
            crate::process::write_atomically(
                &self.enabled_marker(),
                b"TLS listeners on: written by `brokerbench broker up --tls`, removed by --no-tls\n",
            )
        } else {
            match fs::remove_file(self.enabled_marker()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(BrokerError::io("removing", &self.enabled_marker())(e))
                }
                _ => Ok(()),
            }
        }
    }

    /// `broker up --tls`/`--no-tls` for the broker `broker`: refused while it runs (`running`:
    /// its pid; `running_tls`: whether it was started with TLS) the other way, with the
    /// commands that restart it; else TLS is turned on or off for its next starts.
    pub fn switch(
        &self,
        broker: &'static str,
        (running, running_tls): (Option<u32>, bool),
        on: bool,
    ) -> Result<(), BrokerError> {
        if let Some(pid) = running {
            if running_tls != on {
                return Err(BrokerError::TlsMismatch {
                    broker,
                    pid,
                    state: if running_tls {
                        "with TLS"
                    } else {
                        "without TLS"
                    },
                    flag: if on { " --tls" } else { " --no-tls" },
                });
            }
        }
        self.set_enabled(on)
    }

    /// The SASL user's password. Never print it: it goes to the broker's configuration
    /// (readable only by its owner) and to the driver file `broker status --driver-file`
    /// prints when asked.
    pub fn password(&self) -> Result<String, BrokerError> {
        let path = self.password_file();
        fs::read_to_string(&path)
            .map(|text| text.trim().to_string())
            .map_err(BrokerError::io("reading", &path))
    }

    /// Writes the CA, the server and client certificates and the password unless they are
    /// all there. A partial set (an interrupted first run) is generated again as a whole.
    pub fn generate_once(&self) -> Result<(), BrokerError> {
        let files = [
            self.ca(),
            self.dir.join("ca-key.pem"),
            self.server_certificate(),
            self.server_key(),
            self.client_certificate(),
            self.client_key(),
            self.password_file(),
        ];
        if files.iter().all(|file| file.is_file()) {
            return Ok(());
        }
        fs::create_dir_all(&self.dir).map_err(BrokerError::io("creating", &self.dir))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))
            .map_err(BrokerError::io("restricting", &self.dir))?;
        let failed = |what: &str, error: rcgen::Error| BrokerError::Tls {
            what: format!("{what}: {error}"),
        };

        let ca_key = KeyPair::generate().map_err(|e| failed("generating the CA key", e))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| failed("the CA's parameters", e))?;
        // A name of its own: a client given another home's CA then finds no issuer at all
        // (rather than one of the same name whose signature does not match).
        let tag: String = random_password()?.chars().take(8).collect();
        ca_params.distinguished_name.push(
            DnType::CommonName,
            format!("brokerbench throwaway CA {tag}"),
        );
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_certificate = ca_params
            .self_signed(&ca_key)
            .map_err(|e| failed("signing the CA certificate", e))?;
        let issuer = Issuer::new(ca_params, &ca_key);

        let leaf = |names: Vec<String>, common_name: &str, purpose: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().map_err(|e| failed("generating a key", e))?;
            let mut params =
                CertificateParams::new(names).map_err(|e| failed("certificate parameters", e))?;
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = vec![purpose];
            let certificate = params
                .signed_by(&key, &issuer)
                .map_err(|e| failed("signing a certificate", e))?;
            Ok::<_, BrokerError>((certificate.pem(), key.serialize_pem()))
        };
        let (server, server_key) = leaf(
            SERVER_NAMES.iter().map(|name| name.to_string()).collect(),
            "localhost",
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let (client, client_key) = leaf(Vec::new(), USER, ExtendedKeyUsagePurpose::ClientAuth)?;

        write_private(
            &self.dir.join("ca-key.pem"),
            ca_key.serialize_pem().as_bytes(),
        )?;
        write_private(&self.server_key(), server_key.as_bytes())?;
        write_private(&self.client_key(), client_key.as_bytes())?;
        write_private(&self.password_file(), random_password()?.as_bytes())?;
        crate::process::write_atomically(&self.server_certificate(), server.as_bytes())?;
        crate::process::write_atomically(&self.client_certificate(), client.as_bytes())?;
        // The CA last: its presence alone never means a complete set (see above).
        crate::process::write_atomically(&self.ca(), ca_certificate.pem().as_bytes())
    }
}

/// Writes a file only its owner can read, created so from the start (never world-readable
/// for a moment).
pub fn write_private(path: &Path, content: &[u8]) -> Result<(), BrokerError> {
    use std::io::Write;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = Path::new(&temporary);
    let _ = fs::remove_file(temporary);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temporary)
        .map_err(BrokerError::io("creating", temporary))?;
    file.write_all(content)
        .map_err(BrokerError::io("writing", temporary))?;
    fs::rename(temporary, path).map_err(BrokerError::io("renaming to", path))
}

/// 24 random characters from [A-Za-z0-9]: about 143 bits, and nothing a properties file, a
/// JAAS line, a URI or a shell would need to quote.
pub fn random_password() -> Result<String, BrokerError> {
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut random = fs::File::open("/dev/urandom")
        .map_err(BrokerError::io("opening", Path::new("/dev/urandom")))?;
    let mut password = String::new();
    while password.len() < 24 {
        let mut byte = [0u8; 1];
        random
            .read_exact(&mut byte)
            .map_err(BrokerError::io("reading", Path::new("/dev/urandom")))?;
        // 248 = 4 × 62: rejecting the rest keeps every character equally likely.
        if byte[0] < 248 {
            password.push(char::from(ALPHABET[usize::from(byte[0] % 62)]));
        }
    }
    Ok(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_is_generated_once_private_and_kept() {
        let home = tempfile::tempdir().unwrap();
        let tls = TlsFiles::of(home.path());
        assert!(!tls.enabled());
        tls.set_enabled(true).unwrap();
        assert!(tls.enabled());
        let password = tls.password().unwrap();
        assert_eq!(password.len(), 24);
        assert!(password.bytes().all(|b| b.is_ascii_alphanumeric()));
        let ca = fs::read_to_string(tls.ca()).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        for key in [
            tls.server_key(),
            tls.client_key(),
            tls.dir().join("ca-key.pem"),
        ] {
            let mode = fs::metadata(&key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", key.display());
            assert!(fs::read_to_string(&key)
                .unwrap()
                .starts_with("-----BEGIN PRIVATE KEY-----"));
        }
        assert_eq!(
            fs::metadata(tls.password_file())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
        // Off and on again: the same CA and password, so configured clients keep working.
        tls.set_enabled(false).unwrap();
        assert!(!tls.enabled());
        tls.set_enabled(true).unwrap();
        assert_eq!(fs::read_to_string(tls.ca()).unwrap(), ca);
        assert_eq!(tls.password().unwrap(), password);
        // A partial set is made again as a whole.
        fs::remove_file(tls.client_key()).unwrap();
        tls.generate_once().unwrap();
        assert_ne!(fs::read_to_string(tls.ca()).unwrap(), ca);
        assert_ne!(tls.password().unwrap(), password);
    }

    #[test]
    fn the_server_certificate_names_loopback_and_is_signed_by_the_ca() {
        let home = tempfile::tempdir().unwrap();
        let tls = TlsFiles::of(home.path());
        tls.generate_once().unwrap();
        // Checked with OpenSSL's own verifier, as a client would.
        let verify = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(tls.ca())
            .arg("-verify_ip")
            .arg("127.0.0.1")
            .arg(tls.server_certificate())
            .output()
            .expect("the openssl tool (scripts/setup installs it)");
        assert!(verify.status.success(), "{verify:?}");
        let wrong_name = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(tls.ca())
            .args(["-verify_hostname", "example.com"])
            .arg(tls.server_certificate())
            .output()
            .unwrap();
        assert!(!wrong_name.status.success(), "{wrong_name:?}");
        let other = tempfile::tempdir().unwrap();
        let untrusted = TlsFiles::of(other.path());
        untrusted.generate_once().unwrap();
        let foreign = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(untrusted.ca())
            .arg(tls.server_certificate())
            .output()
            .unwrap();
        assert!(!foreign.status.success(), "{foreign:?}");
    }
}
