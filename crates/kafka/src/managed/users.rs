//! The SASL user of the TLS listeners, and what `up` and `status` say about them.

use super::*;

impl Kafka {
    /// Gives the SASL user its SCRAM credentials (through the PLAINTEXT listener), then checks
    /// that it can log in over SASL_SSL with the CA's certificate, as a client will.
    pub(super) fn add_scram_user(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        let failed = |reason: String| BrokerError::StartFailed {
            broker: NAME,
            reason,
            log_file: self.log_file(),
            log_tail: process::log_tail(&self.log_file(), LOG_TAIL_LINES),
        };
        let files = self.tls();
        let password = files.password()?;
        let client = metadata_client(&status.address)
            .map_err(|e| failed(format!("could not create a Kafka client: {e}")))?;
        crate::scram::upsert_user(client.client(), tls::USER, &password, READY_TIMEOUT)
            .map_err(|e| failed(format!("setting the SCRAM user `{}`: {e}", tls::USER)))?;
        let Some((_, sasl_port)) = self.running_tls_ports() else {
            return Ok(());
        };
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", format!("127.0.0.1:{sasl_port}"))
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanisms", DRIVER_FILE_MECHANISM)
            .set("sasl.username", tls::USER)
            .set("sasl.password", &password)
            .set("ssl.ca.location", files.ca().to_string_lossy())
            .set("reconnect.backoff.ms", "100")
            .set_log_level(RDKafkaLogLevel::Emerg);
        let checker: BaseConsumer<Silent> = config
            .create_with_context(Silent)
            .map_err(|e| failed(format!("could not create a SASL_SSL client: {e}")))?;
        // The credentials reach the broker through its metadata log: give them a moment.
        managed::poll(Duration::from_secs(20), || {
            checker
                .fetch_metadata(None, Duration::from_millis(1000))
                .ok()
                .filter(|metadata| !metadata.brokers().is_empty())
        })
        .map(|_| ())
        .ok_or_else(|| {
            failed(format!(
                "the user `{}` could not log in over SASL_SSL (127.0.0.1:{sasl_port}, {DRIVER_FILE_MECHANISM}) within 20 s",
                tls::USER
            ))
        })
    }

    /// Lines `up` and `status` print about the TLS listeners of the running broker.
    pub(super) fn tls_lines(&self) -> Vec<String> {
        let Some((ssl, sasl)) = self.running_tls_ports() else {
            return Vec::new();
        };
        vec![
            format!(
                "TLS:  SASL_SSL 127.0.0.1:{sasl} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; user `{}`), SSL 127.0.0.1:{ssl}",
                tls::USER
            ),
            format!("CA:   {}", self.tls().ca().display()),
            "`brokerbench broker status kafka --driver-file > kafka-tls.yaml` writes a driver file for SASL_SSL (it holds the password)".into(),
        ]
    }
}
