//! TLS and a user on the managed broker (`brokerbench broker up mqtt --tls`): a second
//! listener on the port + 1 (1884 by default) with the home's throwaway certificates (see
//! `brokerbench_brokers::tls`; mosquitto asks for no client certificate), where only the user
//! `brokerbench`, with the home's password, may connect. The plain listener stays anonymous, so
//! plain runs go on beside TLS ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::BrokerError;

/// mosquitto's password tool, beside the broker's program (Debian's mosquitto package puts
/// both in place).
const PASSWD: &str = "mosquitto_passwd";

/// The configuration lines of the TLS listener on `port`, whose password file is `passwords`
/// (written by [`write_passwords`]; the TLS material generated already).
pub fn tls_lines(files: &TlsFiles, port: u16, passwords: &Path) -> String {
    format!(
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
    )
}

/// Writes mosquitto's password file for the user `brokerbench` into the private TLS folder:
/// the password in plain text first (readable by its owner only), then hashed in place by
/// `mosquitto_passwd -U` (found beside `broker`, the mosquitto program, or in its sibling
/// `bin`), so that the password is never on a command line. Removed again when hashing fails.
pub fn write_passwords(files: &TlsFiles, broker: &Path) -> Result<PathBuf, BrokerError> {
    let path = files.dir().join("mosquitto-passwords");
    let line = format!("{}:{}\n", tls::USER, files.password()?);
    tls::write_private(&path, line.as_bytes())?;
    let tool = passwd_tool(broker);
    let hashed = Command::new(&tool).arg("-U").arg(&path).output();
    let failed = match hashed {
        Ok(output) if output.status.success() => return Ok(path),
        Ok(output) => String::from_utf8_lossy(&output.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    let _ = std::fs::remove_file(&path);
    Err(BrokerError::StartFailed {
        broker: "mqtt",
        reason: format!(
            "{} -U could not hash the password file: {failed}",
            tool.display()
        ),
        log_file: path,
        log_tail: String::new(),
    })
}

/// Where mosquitto_passwd is for the mosquitto at `broker` (`/usr/sbin/mosquitto` →
/// `/usr/bin/mosquitto_passwd`).
fn passwd_tool(broker: &Path) -> PathBuf {
    let dir = broker.parent().unwrap_or(Path::new("/usr/bin"));
    let beside = dir.join(PASSWD);
    if beside.is_file() {
        return beside;
    }
    dir.parent()
        .map(|prefix| prefix.join("bin").join(PASSWD))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(PASSWD))
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
