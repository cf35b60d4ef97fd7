//! The lifecycle of a managed broker that is one process started from a configuration file in
//! its own folder ([`Daemon`]), written once: a broker says how it checks, starts, answers and
//! shows itself ([`OneProcess`]) and gets its [`Lifecycle`] — the running one's check, the
//! restart as it was, the stop and what `down` removes — from here. Packaged brokers (Redis,
//! MQTT), Artemis and Pulsar standalone are such brokers.

use std::path::PathBuf;
use std::process::Child;

use crate::daemon::Daemon;
use crate::lifecycle::Lifecycle;
use crate::{BrokerError, BrokerStatus};

/// What a one-process broker says of itself.
pub trait OneProcess {
    /// Its folder, pid file, log, start and stop.
    fn daemon(&self) -> &Daemon;
    /// Settings and installation checks, before anything is touched.
    fn check(&self) -> Result<(), BrokerError>;
    /// The status of its running process `pid`.
    fn status_of(&self, pid: u32) -> BrokerStatus;
    /// Whether the running broker `status` is what `up` asked for.
    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        let _ = status;
        Ok(())
    }
    /// Whether the broker its last configuration names answers its clients.
    fn answers(&self) -> bool;
    /// A new start: writes the configuration of the settings now and spawns the broker.
    fn start(&self) -> Result<Child, BrokerError>;
    /// A start again with the configuration `text` of its last start.
    fn start_with(&self, text: &str) -> Result<Child, BrokerError>;
    /// Waits until a started broker answers (and for what else a start waits).
    fn wait_started(&self, child: &mut Child) -> Result<(), BrokerError> {
        self.daemon().wait(child, || self.answers())
    }
    /// Node `id` started again after it stopped or was killed (a fault's `restart_after`), as
    /// it was; its pid.
    fn restart(&self, id: u32) -> Result<u32, BrokerError> {
        self.daemon().only_node(id)?;
        self.daemon().start_as_it_was(
            |text| self.start_with(text),
            |child| self.wait_started(child),
        )
    }
}

impl<B: OneProcess> Lifecycle for B {
    type Starting = Child;

    fn dir(&self) -> PathBuf {
        self.daemon().dir.clone()
    }

    fn check(&self) -> Result<(), BrokerError> {
        OneProcess::check(self)
    }

    fn running_pid(&self) -> Option<u32> {
        self.daemon().running_pid()
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        OneProcess::status_of(self, pid)
    }

    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        OneProcess::check_running(self, status)
    }

    fn start_again(&self, id: u32) -> Result<u32, BrokerError> {
        self.restart(id)
    }

    fn wait_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        self.daemon().wait_running(status, || self.answers())
    }

    fn start(&self) -> Result<Child, BrokerError> {
        OneProcess::start(self)
    }

    fn wait_started(&self, child: &mut Child) -> Result<BrokerStatus, BrokerError> {
        OneProcess::wait_started(self, child)?;
        Ok(OneProcess::status_of(self, child.id()))
    }

    fn abandon(&self, child: Child) {
        self.daemon().abandon(child);
    }

    fn stop(&self, pid: u32) -> Result<(), BrokerError> {
        self.daemon().stop(pid)
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        self.daemon().leftovers()
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::lifecycle;

    /// A broker that is a shell sleeping, its configuration file its `$0`; each new start's
    /// configuration is numbered.
    struct Sleeper(Daemon, std::cell::Cell<u32>);

    impl OneProcess for Sleeper {
        fn daemon(&self) -> &Daemon {
            &self.0
        }
        fn check(&self) -> Result<(), BrokerError> {
            Ok(())
        }
        fn status_of(&self, pid: u32) -> BrokerStatus {
            self.0.status_of(pid, "127.0.0.1:1".into(), "1".into())
        }
        fn answers(&self) -> bool {
            self.0.running_pid().is_some()
        }
        fn start(&self) -> Result<Child, BrokerError> {
            self.1.set(self.1.get() + 1);
            self.start_with(&format!("start {}", self.1.get()))
        }
        fn start_with(&self, text: &str) -> Result<Child, BrokerError> {
            let mut command = Command::new("sh");
            command.args(["-c", "sleep 60"]).arg(self.0.config_file());
            self.0.spawn(text, command)
        }
    }

    #[test]
    fn up_restart_as_it_was_and_down_come_from_the_hooks() {
        let home = tempfile::tempdir().unwrap();
        let sleeper = Sleeper(Daemon::new("sleeper", home.path()), Default::default());
        let (status, was_running) = lifecycle::up(&sleeper).unwrap();
        assert!(!was_running);
        assert_eq!(lifecycle::up(&sleeper).unwrap(), (status.clone(), true));
        assert!(matches!(
            sleeper.restart(2),
            Err(BrokerError::TooManyNodes { asked: 2, .. })
        ));
        sleeper.0.stop(status.pid).unwrap();
        let again = sleeper.restart(1).unwrap();
        assert_ne!(again, status.pid);
        assert_eq!(sleeper.0.running_pid(), Some(again));
        let text = std::fs::read_to_string(sleeper.0.config_file()).unwrap();
        assert_eq!(text, "start 1");
        assert_eq!(lifecycle::down(&sleeper).unwrap(), Some(again));
        assert_eq!(sleeper.0.running_pid(), None);
    }
}
