//! Whether a started broker answers: metadata requests until one lists a broker, through a
//! client that stays silent while the broker boots (the other steps ask through it too).

use super::*;

impl Kafka {
    /// Polls the broker with metadata requests until one lists a broker. When `child` is the
    /// JVM we just started and it exits meanwhile, fails at once with the log tail.
    pub(super) fn wait_until_ready(
        &self,
        status: &BrokerStatus,
        mut child: Option<Child>,
    ) -> Result<(), BrokerError> {
        let failed = |reason: String| BrokerError::StartFailed {
            broker: NAME,
            reason,
            log_file: self.log_file(),
            log_tail: process::log_tail(&self.log_file(), LOG_TAIL_LINES),
        };
        let client = metadata_client(&status.address).map_err(|error| {
            failed(format!(
                "could not create a Kafka client for {}: {error}",
                status.address
            ))
        })?;
        managed::poll(READY_TIMEOUT, || {
            match client.fetch_metadata(None, Duration::from_millis(500)) {
                Ok(metadata) if !metadata.brokers().is_empty() => return Some(Ok(())),
                _ => {}
            }
            let exited = match child.as_mut() {
                Some(jvm) => jvm.try_wait().ok().flatten().map(|code| code.to_string()),
                None => (!process::is_alive(status.pid)).then(|| "it exited".to_string()),
            };
            exited.map(|exit| {
                Err(failed(format!(
                    "the JVM (pid {}) exited: {exit}",
                    status.pid
                )))
            })
        })
        .unwrap_or_else(|| {
            Err(failed(format!(
                "it (pid {}) did not answer metadata requests on {} within {} s",
                status.pid,
                status.address,
                READY_TIMEOUT.as_secs()
            )))
        })
    }
}

/// A client used only to ask for metadata. It stays silent: while the broker boots, every
/// refused connection would otherwise be logged, and the terminal is the user's.
pub(super) fn metadata_client(address: &str) -> Result<BaseConsumer<Silent>, KafkaError> {
    ClientConfig::new()
        .set("bootstrap.servers", address)
        // Retry refused connections quickly instead of backing off towards 10 s.
        .set("reconnect.backoff.ms", "50")
        .set("reconnect.backoff.max.ms", "200")
        .set_log_level(RDKafkaLogLevel::Emerg)
        .create_with_context(Silent)
}

/// A librdkafka context that drops log lines and error events.
pub(super) struct Silent;

impl ClientContext for Silent {
    fn log(&self, _level: RDKafkaLogLevel, _facility: &str, _message: &str) {}

    fn error(&self, _error: KafkaError, _reason: &str) {}
}

impl ConsumerContext for Silent {}
