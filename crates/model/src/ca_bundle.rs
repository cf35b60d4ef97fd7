//! Where the system keeps the CAs it trusts, for a TLS client told nothing else (a metrics
//! endpoint's or a broker's).

use std::path::PathBuf;

/// Where the system keeps its CA bundle on Debian, Ubuntu, Alpine, Fedora and RHEL.
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The system's CA bundle: `$SSL_CERT_FILE`, else the first of [`SYSTEM_CA_BUNDLES`] there is.
pub fn system_ca_bundle() -> Option<PathBuf> {
    std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .or_else(|| {
            SYSTEM_CA_BUNDLES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
}
