//! The managed-broker skeleton for families outside this crate: a broker that is one process
//! started from a configuration file in its own folder. The family supplies the command, the
//! configuration text and how to tell that it answers; this supplies the rest — folder and
//! lock, pid file, log rotation, detached start, waiting until ready, and stopping exactly the
//! process it started (its command line names our configuration file).

use std::path::{Path, PathBuf};
use std::process::Command;
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

    /// Starts the broker unless it runs: writes `config` to [`Daemon::config_file`], runs
    /// `command` (which must name that file as one argument), and calls `ready` about every
    /// 100 ms until it returns true. Returns the pid and whether it was running before.
    pub fn up(
        &self,
        config: &str,
        mut command: Command,
        ready: impl Fn() -> bool,
    ) -> Result<(u32, bool), BrokerError> {
        let _lock = managed::create_and_lock(&self.dir)?;
        if let Some(pid) = self.running_pid() {
            return Ok((pid, true));
        }
        std::fs::create_dir_all(self.data_dir())
            .map_err(BrokerError::io("creating", &self.data_dir()))?;
        process::write_atomically(&self.config_file(), config.as_bytes())?;
        process::rotate_log(&self.log_file())?;
        process::remove_pid_file(&self.pid_file())?;
        process::output_to(&mut command, &self.log_file())
            .map_err(BrokerError::io("opening", &self.log_file()))?;
        let mut child =
            process::spawn_detached(&mut command).map_err(|e| BrokerError::StartFailed {
                broker: self.name,
                reason: format!("cannot run {:?}: {e}", command.get_program()),
                log_file: self.log_file(),
                log_tail: String::new(),
            })?;
        let pid = child.id();
        process::write_pid_file(&self.pid_file(), pid)?;
        let answered = managed::poll(self.start_timeout, || {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(Err(format!("it exited with {status}")));
            }
            ready().then_some(Ok(()))
        });
        let reason = match answered {
            Some(Ok(())) => return Ok((pid, false)),
            Some(Err(reason)) => reason,
            None => format!("it did not answer within {:?}", self.start_timeout),
        };
        let _ = process::stop(self.name, pid, self.stop_grace);
        let _ = child.wait();
        let _ = process::remove_pid_file(&self.pid_file());
        Err(BrokerError::StartFailed {
            broker: self.name,
            reason,
            log_file: self.log_file(),
            log_tail: process::log_tail(&self.log_file(), 20),
        })
    }

    /// Stops the process this folder started; its pid, or None when none ran.
    pub fn down(&self) -> Result<Option<u32>, BrokerError> {
        managed::down(
            &self.dir,
            || self.running_pid(),
            |pid| process::stop(self.name, pid, self.stop_grace),
            &[self.pid_file()],
        )
    }

    /// The status of the running process `pid`.
    pub fn status_of(&self, pid: u32, address: String, version: String) -> BrokerStatus {
        BrokerStatus {
            name: self.name,
            address,
            pid,
            version,
            data_dir: self.data_dir(),
            log_file: self.log_file(),
            note: None,
        }
    }
}

/// Reads a port variable such as `BROKERBENCH_NATS_PORT` (unset or empty: `default`).
pub fn port_variable(
    broker: &'static str,
    variable: &'static str,
    default: u16,
    max: u16,
    why: &'static str,
) -> Result<u16, BrokerError> {
    let (port, bad) = managed::port_from_variable(std::env::var_os(variable), default, 1..=max);
    match bad {
        None => Ok(port),
        Some(value) => Err(BrokerError::InvalidPortSetting {
            broker,
            variable,
            value,
            max,
            why,
        }),
    }
}

/// True when nothing listens on 127.0.0.1:`port` and it can be bound.
pub fn can_listen(port: u16) -> bool {
    process::can_listen(port)
}
