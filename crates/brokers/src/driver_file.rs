//! The driver file `brokerbench broker status NAME --driver-file` prints for a managed broker:
//! comment lines saying what it reaches (and, over TLS, that it holds a secret), `driver:`, and
//! the family's own fields. Each family gives the fields; the heading is written once here.

use crate::tls::{self, TlsFiles};
use crate::BrokerError;

/// Which managed broker a driver file is for.
#[derive(Debug, Clone, Copy)]
pub struct DriverFile<'a> {
    /// The family's driver name (`redis`).
    pub name: &'a str,
}

impl DriverFile<'_> {
    /// The driver file of a broker started without TLS: `what` it reaches ("Redis", "Kafka's
    /// PLAINTEXT listener"), how it would be secured ("a user", "token authentication"),
    /// then `fields` (whole lines).
    pub fn plain(&self, what: &str, secured_with: &str, fields: &str) -> String {
        let name = self.name;
        format!(
            "\
# The managed {what} (`brokerbench broker status {name} --driver-file`).
# Start it with TLS and {secured_with}: brokerbench broker down {name}; brokerbench broker up {name} --tls
driver: {name}
{fields}"
        )
    }

    /// The driver file of a broker started with TLS: `what` it reaches ("Redis over TLS"),
    /// the secret it `holds` ("the password of the user `brokerbench`"), `more` to say in the
    /// same comment (each new line starting with `# `; empty for nothing), then `fields`.
    pub fn over_tls(&self, what: &str, holds: &str, more: &str, fields: &str) -> String {
        let name = self.name;
        format!(
            "\
# The managed {what} (`brokerbench broker status {name} --driver-file`).
# It holds {holds}: keep it private. brokerbench writes it into no
# result, log or report.{more}
driver: {name}
{fields}"
        )
    }

    /// [`Self::over_tls`] for a secret that is the password of the user `user`.
    pub fn with_password(&self, what: &str, user: &str, more: &str, fields: &str) -> String {
        self.over_tls(
            what,
            &format!("the password of the user `{user}`"),
            more,
            fields,
        )
    }

    /// What `broker up` and `broker status` print of a broker's TLS listener: its `url`, how
    /// one logs in (`login`), the CA to trust, and how to have the driver file, which holds
    /// the `secret` ("password", "token").
    pub fn tls_endpoints(
        &self,
        url: &str,
        login: &str,
        files: &TlsFiles,
        secret: &str,
    ) -> [String; 3] {
        let name = self.name;
        [
            format!("TLS:  {url} ({login})"),
            format!("CA:   {}", files.ca().display()),
            format!("`brokerbench broker status {name} --driver-file > {name}-tls.yaml` writes a driver file for it (it holds the {secret})"),
        ]
    }

    /// The driver file of a broker reached by one URL in `field`: `scheme://address` (the
    /// first of `schemes`), or, with its TLS port and files, the second scheme with the TLS
    /// user's password on 127.0.0.1 and the CA to trust.
    pub fn one_url(
        &self,
        (what, field): (&str, &str),
        schemes: [&str; 2],
        address: &str,
        tls: Option<(u16, &TlsFiles)>,
    ) -> Result<String, BrokerError> {
        let Some((port, files)) = tls else {
            let fields = format!("{field}: {}://{address}\n", schemes[0]);
            return Ok(self.plain(what, "a user", &fields));
        };
        let user = tls::USER;
        let fields = format!(
            "{field}: {}://{user}:{password}@127.0.0.1:{port}\ntls: {{ca_file: '{ca}'}}\n",
            schemes[1],
            password = files.password()?,
            ca = files.ca().display(),
        );
        Ok(self.with_password(&format!("{what} over TLS"), user, "", &fields))
    }
}

#[cfg(test)]
mod tests {
    use super::DriverFile;

    #[test]
    fn a_driver_file_says_what_it_reaches_and_how_to_secure_it_then_its_fields() {
        let file = DriverFile { name: "toy" };
        let plain = file.plain("Toy", "a user", "toy_url: toy://h:1\n");
        assert_eq!(
            plain,
            "# The managed Toy (`brokerbench broker status toy --driver-file`).\n\
             # Start it with TLS and a user: brokerbench broker down toy; brokerbench broker up toy --tls\n\
             driver: toy\ntoy_url: toy://h:1\n"
        );
        let secure = file.with_password("Toy over TLS", "bench", "", "toy_url: toys://h:2\n");
        assert!(secure.starts_with("# The managed Toy over TLS (`brokerbench broker status toy"));
        assert!(secure.contains(
            "# It holds the password of the user `bench`: keep it private. brokerbench writes it into no\n# result, log or report.\ndriver: toy\n"
        ));
        assert!(secure.ends_with("toy_url: toys://h:2\n"));
    }
}
