//! TLS and a user on the managed broker (`brokerbench broker up mqtt --tls`): a second
//! listener on the port + 1 (1884 by default) with the home's throwaway certificates (see
//! `brokerbench_brokers::tls`; a client certificate is checked when given, not required),
//! where only the user `brokerbench`, with the home's password, may connect. The plain
//! listener stays anonymous, so plain runs go on beside TLS ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::BrokerError;

/// The TLS port is the plain port + this.
pub const TLS_OFFSET: u16 = 1;

/// Where mosquitto_passwd is (Debian's mosquitto package).
const PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// The configuration lines of the TLS listener on `port`, whose password file is `passwords`
/// (written by [`write_passwords`]).
pub fn tls_lines(files: &TlsFiles, port: u16, passwords: &Path) -> Result<String, BrokerError> {
    files.generate_once()?;
    Ok(format!(
        "\
# TLS and a user: brokerbench broker up mqtt --tls
listener {port} 127.0.0.1
cafile {ca}
certfile {cert}
keyfile {key}
require_certificate false
allow_anonymous false
password_file {passwords}
",
        cert = files.server_certificate().display(),
        key = files.server_key().display(),
        ca = files.ca().display(),
        passwords = passwords.display(),
    ))
}

/// Writes mosquitto's password file for the user `brokerbench`: the password in plain text
/// first (readable by its owner only), then hashed in place by `mosquitto_passwd -U`, so that
/// the password is never on a command line.
pub fn write_passwords(files: &TlsFiles, path: &Path) -> Result<PathBuf, BrokerError> {
    let line = format!("{}:{}\n", tls::USER, files.password()?);
    tls::write_private(path, line.as_bytes())?;
    let output = Command::new(PASSWD)
        .arg("-U")
        .arg(path)
        .output()
        .map_err(BrokerError::io("running", Path::new(PASSWD)))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(path);
        return Err(BrokerError::StartFailed {
            broker: "mqtt",
            reason: format!(
                "{PASSWD} -U could not hash the password file: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            log_file: path.to_path_buf(),
            log_tail: String::new(),
        });
    }
    Ok(path.to_path_buf())
}

/// The TLS port a configuration names, when it was written with TLS.
pub fn tls_port(configuration: &str) -> Option<u16> {
    configuration
        .lines()
        .filter_map(|l| l.strip_prefix("listener "))
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|p| p.parse().ok())
}
