use std::cell::Cell;
use std::path::PathBuf;

use super::*;
use crate::NodeStatus;

/// A broker whose process this folder started is found `found` times (then never), and
/// whose running process never answers.
struct Dying {
    dir: tempfile::TempDir,
    found: Cell<u32>,
    started: Cell<bool>,
}

impl Dying {
    fn new(found: u32) -> Self {
        Dying {
            dir: tempfile::tempdir().unwrap(),
            found: Cell::new(found),
            started: Cell::new(false),
        }
    }

    fn status(&self, pid: u32) -> BrokerStatus {
        BrokerStatus {
            name: "dying",
            address: "127.0.0.1:1".into(),
            pid,
            version: "1".into(),
            data_dir: self.dir(),
            log_file: self.dir().join("log"),
            note: None,
            nodes: NodeStatus::only(pid, "127.0.0.1:1"),
            settings: Vec::new(),
        }
    }
}

impl Lifecycle for Dying {
    type Starting = ();

    fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
    fn running_pid(&self) -> Option<u32> {
        let left = self.found.get();
        self.found.set(left.saturating_sub(1));
        (left > 0).then_some(7)
    }
    fn status_of(&self, pid: u32) -> BrokerStatus {
        self.status(pid)
    }
    fn check_running(&self, _: &BrokerStatus) -> Result<(), BrokerError> {
        Ok(())
    }
    fn start_again(&self, _: u32) -> Result<u32, BrokerError> {
        unreachable!("no node is down")
    }
    fn wait_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        Err(BrokerError::StartFailed {
            broker: "dying",
            reason: format!("the process (pid {}) exited", status.pid),
            log_file: status.log_file.clone(),
            log_tail: String::new(),
        })
    }
    fn start(&self) -> Result<(), BrokerError> {
        self.started.set(true);
        Ok(())
    }
    fn wait_started(&self, _: &mut ()) -> Result<BrokerStatus, BrokerError> {
        Ok(self.status(8))
    }
    fn abandon(&self, _: ()) {}
    fn stop(&self, _: u32) -> Result<(), BrokerError> {
        Ok(())
    }
    fn leftovers(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

#[test]
fn a_broker_that_dies_while_up_waits_for_it_is_started_afresh() {
    let broker = Dying::new(1);
    let (status, was_running) = up(&broker).unwrap();
    assert!(broker.started.get());
    assert_eq!((status.pid, was_running), (8, false));
    let note = status.note.unwrap_or_default();
    assert!(note.contains("(pid 7) exited while waited for"), "{note}");
}

#[test]
fn a_running_broker_that_does_not_answer_is_an_error_not_a_second_start() {
    let broker = Dying::new(u32::MAX);
    let error = up(&broker).unwrap_err().to_string();
    assert!(!broker.started.get());
    assert!(error.contains("pid 7"), "{error}");
}
