//! The connection probe: asks for metadata until the broker answers, and tells refused
//! credentials and failed TLS handshakes (which stop the run at once) from a broker that is
//! not there yet.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use brokerbench_driver::DriverError;

use crate::driver::KafkaDriver;

/// A librdkafka context that keeps the last error event (code and librdkafka's words) and
/// drops log lines: the connection probe reads it to tell refused credentials and failed
/// TLS handshakes from a broker that is not there yet.
#[derive(Default)]
struct ErrorWatch {
    last: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl ErrorWatch {
    fn last(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.last.lock().map(|last| last.clone()).unwrap_or(None)
    }
}

impl rdkafka::ClientContext for ErrorWatch {
    fn log(&self, _level: RDKafkaLogLevel, _facility: &str, _message: &str) {}

    fn error(&self, error: KafkaError, reason: &str) {
        if let (Some(code), Ok(mut last)) = (error.rdkafka_error_code(), self.last.lock()) {
            *last = Some((code, reason.to_string()));
        }
    }
}

impl rdkafka::consumer::ConsumerContext for ErrorWatch {}

/// How long the broker has to answer a metadata request before the run fails as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl KafkaDriver {
    pub(crate) fn unreachable(&self, reason: String) -> DriverError {
        DriverError::Unreachable {
            broker: "kafka",
            address: self.bootstrap.clone(),
            reason,
            hint: "start a local broker with `brokerbench broker up kafka`, or leave bootstrap_servers out of the driver file to use the managed one".into(),
        }
    }

    /// Asks for metadata until the broker answers; fails at once when librdkafka reports that
    /// the broker refused the credentials or the TLS handshake failed, naming the user (never
    /// the password) and the setting to fix.
    pub(crate) fn probe_metadata(&self) -> Result<rdkafka::metadata::Metadata, DriverError> {
        let probe: BaseConsumer<ErrorWatch> = self
            .base_config()
            .create_with_context(ErrorWatch::default())
            .map_err(|e| DriverError::Other(format!("creating a Kafka client: {e}")))?;
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        loop {
            let outcome = probe.fetch_metadata(None, Duration::from_millis(500));
            // Error events reach the context only while the client is polled.
            let _ = probe.poll(Duration::ZERO);
            let seen = probe.context().last();
            if let Some((code, reason)) = &seen {
                if let Some(error) = self.refusal(*code, reason) {
                    return Err(error);
                }
            }
            match outcome {
                Ok(metadata) => return Ok(metadata),
                Err(e) if Instant::now() >= deadline => {
                    let said = seen
                        .map(|(_, reason)| format!("; librdkafka said: {reason}"))
                        .unwrap_or_default();
                    return Err(self.unreachable(format!(
                        "no answer to a metadata request within {CONNECT_TIMEOUT:?} ({e}){said}"
                    )));
                }
                Err(_) => {}
            }
        }
    }

    /// A setting that can be read from the driver file, wherever it was given.
    fn client_setting(&self, key: &str) -> Option<&str> {
        [&self.config.producer_config, &self.config.common_config]
            .into_iter()
            .find_map(|map| map.get(key))
            .map(String::as_str)
    }

    /// What a librdkafka error event means for connecting: refused credentials or a failed
    /// TLS handshake stop the run at once; anything else is retried until the timeout.
    fn refusal(&self, code: RDKafkaErrorCode, reason: &str) -> Option<DriverError> {
        let reason = brokerbench_model::redact::redact_uri(reason);
        match code {
            RDKafkaErrorCode::Authentication => {
                let user = self.client_setting("sasl.username").unwrap_or("(none)");
                let mechanism = self
                    .client_setting("sasl.mechanisms")
                    .or_else(|| self.client_setting("sasl.mechanism"))
                    .unwrap_or("GSSAPI");
                Some(DriverError::Authentication {
                    broker: "kafka",
                    address: self.bootstrap.clone(),
                    reason: format!(
                        "user `{user}` (SASL {mechanism}): {reason}; check sasl.username and sasl.password in the driver file's common_config (for the managed broker, `brokerbench broker status kafka --driver-file` prints a working one)"
                    ),
                })
            }
            // The broker's alert about the client's certificate arrives as a failed read.
            _ if reason.contains("SSL alert") => Some(DriverError::Unreachable {
                broker: "kafka",
                address: self.bootstrap.clone(),
                reason: format!("the TLS handshake failed: {reason}"),
                hint: "the broker refused the client's certificate: set ssl.certificate.location and ssl.key.location in common_config to a certificate signed by a CA the broker trusts (the managed broker's: `brokerbench broker status kafka --driver-file` names them)".into(),
            }),
            RDKafkaErrorCode::SSL => {
                let hint = if reason.contains("certificate verify failed")
                    || reason.contains("could not be verified")
                {
                    "the broker's certificate is not signed by a CA the client trusts: set ssl.ca.location in common_config to the CA certificate that signed it (the managed broker's is <brokerbench home>/kafka/tls/ca.pem; `brokerbench broker status kafka --driver-file` names it)"
                } else {
                    "check security.protocol and the ssl.* settings in the driver file's common_config"
                };
                Some(DriverError::Unreachable {
                    broker: "kafka",
                    address: self.bootstrap.clone(),
                    reason: format!("the TLS handshake failed: {reason}"),
                    hint: hint.into(),
                })
            }
            _ => None,
        }
    }
}
