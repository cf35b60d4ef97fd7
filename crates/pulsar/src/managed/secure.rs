//! TLS and authentication on the managed Pulsar (`brokerbench broker up pulsar --tls`): a TLS
//! listener on the binary port + 1 (6651 by default, Pulsar's own) with the home's throwaway
//! certificates (see `brokerbench_brokers::tls`), and Pulsar's token and TLS authentication
//! switched on. Clients that give no credentials still connect, on either port, as the role
//! `anonymous` (authorization stays off), so plain runs go on beside TLS ones; a token or
//! certificate that is given must be valid.
//!
//! The token is a JWT (HS256) for the role `brokerbench`, signed with a key generated once
//! into `tls/pulsar-token-key` (0600) — the broker's `tokenSecretKey` — so a token printed by
//! `broker status pulsar --driver-file` stays valid across restarts.

use std::path::PathBuf;

use base64::Engine;
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::BrokerError;

/// The line that opens the block: a configuration holding it was started with TLS.
pub const TLS_MARK: &str = "# TLS and authentication (`brokerbench broker up pulsar --tls`)";
/// The TLS listener is on the binary port + this.
pub const TLS_OFFSET: u16 = 1;

/// The configuration block for a TLS listener on `port`, generating the signing key the
/// first time.
pub fn block(files: &TlsFiles, port: u16) -> Result<String, BrokerError> {
    files.generate_once()?;
    let key = key_file(files);
    if !key.is_file() {
        let secret = tls::random_password()? + &tls::random_password()?;
        tls::write_private(&key, secret.as_bytes())?;
    }
    Ok(format!(
        "
{TLS_MARK}: a throwaway CA's certificates, see tls/.
brokerServicePortTls={port}
tlsCertificateFilePath={certificate}
tlsKeyFilePath={server_key}
tlsTrustCertsFilePath={ca}
tlsRequireTrustedClientCertOnConnect=false
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,org.apache.pulsar.broker.authentication.AuthenticationProviderTls
tokenSecretKey=file://{key}
anonymousUserRole=anonymous
",
        certificate = files.server_certificate().display(),
        server_key = files.server_key().display(),
        ca = files.ca().display(),
        key = key.display(),
    ))
}

/// The token of the role `brokerbench` (a secret: never print it).
pub fn token(files: &TlsFiles) -> Result<String, BrokerError> {
    let path = key_file(files);
    let key = std::fs::read(&path).map_err(BrokerError::io("reading", &path))?;
    Ok(sign(&key, tls::USER))
}

/// The TLS port a configuration sets, if it has a TLS listener.
pub fn tls_port(configuration: &str) -> Option<u16> {
    configuration
        .lines()
        .filter_map(|line| line.trim().strip_prefix("brokerServicePortTls="))
        .filter_map(|value| value.trim().parse().ok())
        .next_back()
}

fn key_file(files: &TlsFiles) -> PathBuf {
    files.dir().join("pulsar-token-key")
}

/// A JWT whose subject is `role`, signed with HMAC-SHA256 under `key`, as Pulsar's token
/// authentication checks it.
fn sign(key: &[u8], role: &str) -> String {
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let claims = serde_json::json!({ "sub": role }).to_string();
    let unsigned = format!(
        "{}.{}",
        encode(br#"{"alg":"HS256"}"#),
        encode(claims.as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let signature = ring::hmac::sign(&key, unsigned.as_bytes());
    format!("{unsigned}.{}", encode(signature.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_a_signed_jwt_for_the_role() {
        // The same JWT as Python's hmac and base64 modules make of this key and role.
        assert_eq!(
            sign(b"0123456789abcdef0123456789abcdef", "brokerbench"),
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJicm9rZXJiZW5jaCJ9.yMvZNmAUXoxHnzt-W9ca77m_ofWMJURWDj8eH4tncgg"
        );
        let text = format!("brokerServicePortTls=6651\n{TLS_MARK}\nbrokerServicePortTls=7001");
        assert_eq!(tls_port(&text), Some(7001));
    }
}
