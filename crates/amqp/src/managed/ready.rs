//! Readiness: polling a starting node until AMQP, management and Prometheus answer, and the
//! start failure that quotes the log explaining why not.

use std::fs;
use std::process::Child;

use brokerbench_brokers::{managed, process, BrokerError};

use super::install::boot_failure;
use super::names::*;
use super::node::RabbitMq;
use super::ports::{answers, node_name};

/// What `wait_until_ready` watches for an early exit.
pub(super) enum Watch<'a> {
    /// The start script we just spawned; it exits when the node does.
    Started(&'a mut Child),
    /// The `beam.smp` of a node that was running already.
    Running(u32),
}

impl RabbitMq {
    /// Polls until the node answers AMQP on `port` as node `brokerbench_PORT@localhost` and
    /// its management and Prometheus ports accept connections. Returns the pid of its
    /// `beam.smp`. Fails at once, with the log's explanation, when the node exits meanwhile.
    pub(super) fn wait_until_ready(
        &self,
        port: u16,
        mut watch: Watch<'_>,
    ) -> Result<u32, BrokerError> {
        let node = node_name(port);
        let ownership = self.ownership_arguments();
        let mut last_pid = None;
        let outcome = managed::poll(READY_TIMEOUT, || {
            let pid = match watch {
                Watch::Running(pid) => Some(pid),
                // RabbitMQ writes its pid file early in its boot.
                Watch::Started(_) => process::read_pid_file(&self.pid_file())
                    .filter(|&pid| process::is_ours(pid, &ownership)),
            };
            last_pid = pid;
            if let Some(pid) = pid {
                if answers(port, &node) {
                    return Some(Ok(pid));
                }
            }
            let exited = match &mut watch {
                Watch::Started(script) => script.try_wait().ok().flatten().is_some(),
                Watch::Running(pid) => !process::is_alive(*pid),
            };
            exited.then(|| {
                Err(self.start_failed(format!(
                    "the node exited before it answered on 127.0.0.1:{port}"
                )))
            })
        });
        outcome.unwrap_or_else(|| {
            let who = last_pid.map_or_else(String::new, |pid| format!(" (pid {pid})"));
            Err(self.start_failed(format!(
                "the node{who} did not answer AMQP on 127.0.0.1:{port} (with management on {} and Prometheus on {}) within {} s",
                port + MANAGEMENT_OFFSET,
                port + PROMETHEUS_OFFSET,
                READY_TIMEOUT.as_secs()
            )))
        })
    }

    /// A start failure quoting whichever log explains it: RabbitMQ prints `BOOT FAILED` and
    /// the reason to stdout (the startup log) and to its own log.
    pub(super) fn start_failed(&self, reason: String) -> BrokerError {
        let logs = [self.startup_log(), self.log_file()];
        let explained = logs.iter().find_map(|log| {
            let text = fs::read_to_string(log).ok()?;
            boot_failure(&text).map(|excerpt| (log.clone(), excerpt))
        });
        let (log_file, log_tail) = explained.unwrap_or_else(|| {
            let log = self.startup_log();
            let tail = process::log_tail(&log, LOG_TAIL_LINES);
            (log, tail)
        });
        BrokerError::StartFailed {
            broker: NAME,
            reason,
            log_file,
            log_tail,
        }
    }
}
