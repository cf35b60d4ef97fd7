//! What a family's own client tells a run when it could not connect: the broker it tried, why,
//! and what to check, in the same words for every family.

use crate::net::ConnectError;
use crate::DriverError;

/// Whom a connection was to, as the hints name it.
pub struct Dialed {
    /// The family's name (`brokerbench broker up NAME`).
    pub broker: &'static str,
    /// The address as shown, credentials removed.
    pub address: String,
    /// What the family calls its broker in prose: `server` or `broker`.
    pub noun: &'static str,
    /// The driver-file field that names the broker.
    pub field: &'static str,
    /// How a TLS address is written, and where it points: `rediss://host:port, the server's
    /// TLS port`.
    pub tls_address: &'static str,
    /// What to check when the credentials are refused, told after the broker's words (say,
    /// ` (no user given); the broker wants one: …`); empty for nothing more.
    pub login_hint: String,
}

impl ConnectError {
    /// The run's error for a connection to `dialed` that failed so.
    pub fn for_run(self, dialed: Dialed) -> DriverError {
        let Dialed {
            broker,
            address,
            noun,
            field,
            tls_address,
            login_hint,
        } = dialed;
        match self {
            ConnectError::Unreachable(reason) => DriverError::Unreachable {
                broker,
                address,
                reason,
                hint: format!("start the managed {noun} with `brokerbench broker up {broker}`, or remove `{field}` from the driver file to let brokerbench start it"),
            },
            ConnectError::Authentication(reason) => DriverError::Authentication {
                broker,
                address,
                reason: format!("{reason}{login_hint}"),
            },
            ConnectError::Tls(reason) => DriverError::Unreachable {
                broker,
                address,
                reason,
                hint: format!("check {field} ({tls_address}) and the driver file's tls: block (ca_file, cert_file, key_file, server_name)"),
            },
            ConnectError::Protocol(reason) => {
                DriverError::Other(format!("{broker} at {address}: {reason}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialed() -> Dialed {
        Dialed {
            broker: "toy",
            address: "toy://u:***@h:1".into(),
            noun: "server",
            field: "toy_url",
            tls_address: "toys://host:port, the server's TLS port",
            login_hint: "; check toy_url".into(),
        }
    }

    #[test]
    fn each_failure_names_the_broker_and_what_to_check() {
        let unreachable = ConnectError::Unreachable("refused".into()).for_run(dialed());
        let text = unreachable.to_string();
        assert!(
            text.contains("toy://u:***@h:1") && text.contains("refused"),
            "{text}"
        );
        assert!(
            text.contains("start the managed server with `brokerbench broker up toy`, or remove `toy_url` from the driver file"),
            "{text}"
        );
        let login = ConnectError::Authentication("WRONGPASS".into()).for_run(dialed());
        assert_eq!(
            login.to_string(),
            "toy at toy://u:***@h:1 refused the credentials: WRONGPASS; check toy_url"
        );
        let tls = ConnectError::Tls("unknown CA".into()).for_run(dialed());
        assert!(
            tls.to_string().contains("check toy_url (toys://host:port, the server's TLS port) and the driver file's tls: block"),
            "{tls}"
        );
        let odd = ConnectError::Protocol("not RESP".into()).for_run(dialed());
        assert_eq!(odd.to_string(), "toy at toy://u:***@h:1: not RESP");
    }
}
