//! The parts of a [`crate::lifecycle::Lifecycle`] for a broker that is one process started
//! from a configuration file in its own folder: the folder's layout, the pid file, log
//! rotation, the detached start, waiting until it answers, and stopping exactly the process
//! it started (its command line names our configuration file). The broker supplies the
//! command, the configuration text and how to tell that it answers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::{managed, process, BrokerError, BrokerStatus};

/// One single-process managed broker.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// Name on the command line, e.g. `nats`.
    pub name: &'static str,
    /// Its folder: configuration, data, log, pid file.
    pub dir: PathBuf,
    /// How long `up` waits for it to answer.
    pub start_timeout: Duration,
    /// How long `down` waits after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
}

impl Daemon {
    /// The broker `name` kept in `home/name`.
    pub fn new(name: &'static str, home: &Path) -> Self {
        Daemon {
            name,
            dir: managed::absolute_home(home).join(name),
            start_timeout: Duration::from_secs(30),
            stop_grace: Duration::from_secs(10),
        }
    }

    pub fn config_file(&self) -> PathBuf {
        self.dir.join(format!("{}.conf", self.name))
    }
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
    pub fn log_file(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }
    fn pid_file(&self) -> PathBuf {
        self.dir.join(format!("{}.pid", self.name))
    }

    /// The running process this folder started, if any.
    pub fn running_pid(&self) -> Option<u32> {
        process::find_ours(&self.pid_file(), &[self.config_file()])
    }

    /// The start of a [`crate::lifecycle::Lifecycle`]: writes `config` to
    /// [`Daemon::config_file`], runs `command` (which must name that file as one argument)
    /// with its output in the log, and records its pid.
    pub fn spawn(&self, config: &str, mut command: Command) -> Result<Child, BrokerError> {
        std::fs::create_dir_all(self.data_dir())
            .map_err(BrokerError::io("creating", &self.data_dir()))?;
        // Private: it may hold a user's password (a managed broker with TLS).
        crate::tls::write_private(&self.config_file(), config.as_bytes())?;
        process::rotate_log(&self.log_file())?;
        process::remove_pid_file(&self.pid_file())?;
        process::output_to(&mut command, &self.log_file())
            .map_err(BrokerError::io("opening", &self.log_file()))?;
        let child =
            process::spawn_detached(&mut command).map_err(|e| BrokerError::StartFailed {
                broker: self.name,
                reason: format!("cannot run {:?}: {e}", command.get_program()),
                log_file: self.log_file(),
                log_tail: String::new(),
            })?;
        process::write_pid_file(&self.pid_file(), child.id())?;
        Ok(child)
    }

    /// Before a start: a previous instance still exiting (a killed JVM's threads winding
    /// down) is waited for, so that its ports are free.
    pub fn wait_previous_exit(&self) {
        process::wait_if_exiting(&self.pid_file());
    }

    /// Calls `ready` about every 100 ms until it returns true (Ok), the process exits or
    /// [`Daemon::start_timeout`] passes (an error quoting the log).
    pub fn wait(&self, child: &mut Child, ready: impl Fn() -> bool) -> Result<(), BrokerError> {
        let answered = managed::poll(self.start_timeout, || {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(Err(format!("it exited with {status}")));
            }
            ready().then_some(Ok(()))
        });
        let reason = match answered {
            Some(Ok(())) => return Ok(()),
            Some(Err(reason)) => reason,
            None => format!("it did not answer within {:?}", self.start_timeout),
        };
        Err(BrokerError::StartFailed {
            broker: self.name,
            reason,
            log_file: self.log_file(),
            log_tail: process::log_tail(&self.log_file(), 20),
        })
    }

    /// The check of a broker found running (`Lifecycle::wait_running`): calls `answers` about
    /// every 100 ms until it returns true, for [`Daemon::start_timeout`] at most, after which
    /// the error names the running process and its address and quotes the log.
    pub fn wait_running(
        &self,
        status: &BrokerStatus,
        answers: impl Fn() -> bool,
    ) -> Result<(), BrokerError> {
        let timeout = self.start_timeout;
        if managed::poll(timeout, || answers().then_some(())).is_some() {
            return Ok(());
        }
        Err(BrokerError::StartFailed {
            broker: self.name,
            reason: format!(
                "the running broker (pid {}) did not answer on {} within {timeout:?}",
                status.pid, status.address
            ),
            log_file: self.log_file(),
            log_tail: process::log_tail(&self.log_file(), 20),
        })
    }

    /// The broker started again after it stopped or was killed (a fault's `restart_after`),
    /// as it was: `spawn` gets the configuration it last started with, whatever the settings
    /// say now, and `wait` waits until it answers; a start that does not is taken down again.
    /// Its pid, or the running one's when it runs.
    pub fn start_as_it_was(
        &self,
        spawn: impl FnOnce(&str) -> Result<Child, BrokerError>,
        wait: impl FnOnce(&mut Child) -> Result<(), BrokerError>,
    ) -> Result<u32, BrokerError> {
        if let Some(pid) = self.running_pid() {
            return Ok(pid);
        }
        let file = self.config_file();
        let text = std::fs::read_to_string(&file).map_err(BrokerError::io("reading", &file))?;
        let mut child = spawn(&text)?;
        if let Err(e) = wait(&mut child) {
            self.abandon(child);
            return Err(e);
        }
        Ok(child.id())
    }

    /// Refuses a node other than 1 of a broker that runs one.
    pub fn only_node(&self, id: u32) -> Result<(), BrokerError> {
        match id {
            1 => Ok(()),
            _ => Err(BrokerError::TooManyNodes {
                broker: self.name,
                asked: id,
                max: 1,
            }),
        }
    }

    /// Takes a process that failed to start down and removes its pid file.
    pub fn abandon(&self, mut child: Child) {
        let _ = process::stop(self.name, child.id(), self.stop_grace);
        let _ = child.wait();
        let _ = process::remove_pid_file(&self.pid_file());
    }

    /// Stops the process `pid` (ours): SIGTERM, then SIGKILL after [`Daemon::stop_grace`].
    pub fn stop(&self, pid: u32) -> Result<(), BrokerError> {
        process::stop(self.name, pid, self.stop_grace)
    }

    /// What `down` removes.
    pub fn leftovers(&self) -> Vec<PathBuf> {
        vec![self.pid_file()]
    }

    /// The status of the running process `pid`.
    pub fn status_of(&self, pid: u32, address: String, version: String) -> BrokerStatus {
        BrokerStatus {
            name: self.name,
            nodes: crate::NodeStatus::only(pid, &address),
            address,
            pid,
            version,
            data_dir: self.data_dir(),
            log_file: self.log_file(),
            note: None,
            settings: crate::settings::recorded(&self.dir),
        }
    }
}

/// True when nothing listens on 127.0.0.1:`port` and it can be bound.
pub fn can_listen(port: u16) -> bool {
    process::can_listen(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_needs_the_configuration_of_a_start_and_node_one() {
        let home = tempfile::tempdir().unwrap();
        let daemon = Daemon::new("toy", home.path());
        let spawned = std::cell::Cell::new(false);
        let error = daemon
            .start_as_it_was(
                |_| {
                    spawned.set(true);
                    Err(BrokerError::Unsupported { what: "no".into() })
                },
                |_| Ok(()),
            )
            .unwrap_err();
        assert!(!spawned.get());
        assert!(error.to_string().contains("toy.conf"), "{error}");
        assert!(daemon.only_node(1).is_ok());
        assert!(matches!(
            daemon.only_node(2),
            Err(BrokerError::TooManyNodes {
                asked: 2,
                max: 1,
                ..
            })
        ));
    }
}
