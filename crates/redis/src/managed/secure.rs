//! TLS and a user on the managed Redis (`brokerbench broker up redis --tls`): a TLS port (the
//! port + 1, 6380 by default) beside the plain one, with the home's throwaway certificates (see
//! `brokerbench_brokers::tls`; a client certificate is checked when given, not required), and
//! an ACL user `brokerbench` with every command on every key (written as Redis 6.0 reads it
//! too), whose password is the home's. Clients that give
//! no login go on as Redis's `default` user (no password), so plain runs go on beside TLS ones;
//! a login that is given must be right.

use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::BrokerError;

/// The configuration lines of the TLS port `port` and the user (they hold its password: the
/// configuration file is readable by its owner only).
pub fn tls_lines(files: &TlsFiles, port: u16) -> Result<String, BrokerError> {
    files.generate_once()?;
    Ok(format!(
        "\
# TLS and a user: brokerbench broker up redis --tls
tls-port {port}
tls-cert-file \"{cert}\"
tls-key-file \"{key}\"
tls-ca-cert-file \"{ca}\"
tls-auth-clients optional
user {user} on >{password} ~* +@all
",
        cert = files.server_certificate().display(),
        key = files.server_key().display(),
        ca = files.ca().display(),
        user = tls::USER,
        password = files.password()?,
    ))
}

/// The TLS port a configuration names, when it was written with TLS.
pub fn tls_port(configuration: &str) -> Option<u16> {
    configuration
        .lines()
        .find_map(|l| l.strip_prefix("tls-port "))
        .and_then(|p| p.trim().parse().ok())
}
