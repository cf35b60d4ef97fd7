//! The injector against real processes: `sleep` processes stand for a broker's nodes, so
//! that signals, restarts and commands are the real ones.

use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use brokerbench_faults::{Injected, Injector, Leader, Nodes};
use brokerbench_model::faults::{Fault, FaultAction, FaultNode};
use brokerbench_model::{Phase, RunObserver};

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Nodes that are `sleep` processes; a restart starts another.
#[derive(Clone, Default)]
struct Sleepers(Arc<Mutex<Vec<Child>>>);

impl Sleepers {
    fn new(count: usize) -> Self {
        let nodes = Sleepers::default();
        for _ in 0..count {
            nodes.0.lock().unwrap().push(sleeper());
        }
        nodes
    }

    /// Node 1 killed before the run, as a crashed node would be.
    fn kill_first(&self) {
        let mut children = self.0.lock().unwrap();
        let _ = children[0].kill();
        let _ = children[0].wait();
    }

    fn state(&self, id: u32) -> char {
        let pid = self.0.lock().unwrap()[id as usize - 1].id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit(')')
            .next()
            .and_then(|r| r.trim().chars().next())
            .unwrap_or('?')
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        if Arc::strong_count(&self.0) == 1 {
            for child in self.0.lock().unwrap().iter_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn sleeper() -> Child {
    Command::new("sleep").arg("60").spawn().expect("sleep runs")
}

impl Nodes for Sleepers {
    fn count(&self) -> u32 {
        self.0.lock().unwrap().len() as u32
    }
    fn pid(&self, id: u32) -> Option<u32> {
        let mut nodes = self.0.lock().unwrap();
        let child = nodes.get_mut(id as usize - 1)?;
        match child.try_wait() {
            Ok(None) => Some(child.id()),
            _ => None,
        }
    }
    fn restart(&self, id: u32) -> Result<u32, String> {
        let mut nodes = self.0.lock().unwrap();
        let _ = nodes[id as usize - 1].wait();
        nodes[id as usize - 1] = sleeper();
        Ok(nodes[id as usize - 1].id())
    }
    /// The first node that runs leads, as after an election among those left.
    fn leader(&self) -> Result<Leader, String> {
        let node = (1..=self.count())
            .find(|&id| self.pid(id).is_some())
            .ok_or("no node runs")?;
        Ok(Leader {
            node,
            of: "stream s".into(),
        })
    }
}

fn fault(at_ms: u64, action: FaultAction, node: Option<u32>) -> Fault {
    Fault {
        at: Duration::from_millis(at_ms),
        action,
        node: node.map(FaultNode::Id),
        lasts: None,
        restart_after: None,
        run: None,
        undo: None,
    }
}

#[test]
fn pause_kill_restart_and_command_are_carried_out_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = Sleepers::new(2);
    let pause = Fault {
        lasts: Some(Duration::from_millis(400)),
        ..fault(100, FaultAction::Pause, Some(1))
    };
    let kill = Fault {
        restart_after: Some(Duration::from_millis(300)),
        ..fault(200, FaultAction::Kill, Some(2))
    };
    let command = Fault {
        run: Some("echo injected".into()),
        undo: Some("echo undone; exit 3".into()),
        lasts: Some(Duration::from_millis(100)),
        ..fault(50, FaultAction::Command, None)
    };
    let first_pid = nodes.pid(2).unwrap();
    let mut injector = Injector::new(
        vec![pause, kill, command],
        1,
        dir.path(),
        Some(Box::new(nodes.clone())),
        now_ns,
    );
    injector.phase_started(Phase::Warmup, now_ns());
    injector.phase_started(Phase::Measurement, now_ns());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(nodes.state(1), 'T', "node 1 is stopped while paused");
    // The pause ends at 500 ms, when node 2's restart is due too: the one thread does both.
    std::thread::sleep(Duration::from_millis(600));
    assert_ne!(nodes.state(1), 'T', "node 1 runs again after its pause");
    let marks = injector.marks();
    let (done, _) = injector.finish();
    assert_eq!(done[0].pid, nodes.pid(1));
    // Each fault is marked from its injection to its end, as it happened.
    let (paused, unpaused) = (done[0].injected_ns.unwrap(), done[0].ended_ns.unwrap());
    assert!(!marks.during(paused - 1, paused).contains('1'));
    assert!(marks.during(paused, paused + 1).contains('1'));
    assert!(!marks.during(unpaused, unpaused + 1).contains('1'));
    let paused_for = done[0].ended_ns.unwrap() - done[0].injected_ns.unwrap();
    assert!(
        (400_000_000..700_000_000).contains(&paused_for),
        "{paused_for}"
    );
    assert_eq!(done[1].pid, Some(first_pid));
    assert_ne!(done[1].restarted_pid, Some(first_pid));
    assert_eq!(done[1].restarted_pid, nodes.pid(2), "node 2 runs again");
    let log = std::fs::read_to_string(dir.path().join("fault-3.log")).unwrap();
    assert!(log.contains("injected") && log.contains("undone"), "{log}");
    assert!(
        done[2].problems[0].contains("exit status: 3"),
        "{:?}",
        done[2].problems
    );
}

#[test]
fn a_run_that_ends_early_undoes_what_is_due_and_injects_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = Sleepers::new(1);
    let pause = Fault {
        lasts: Some(Duration::from_secs(60)),
        ..fault(0, FaultAction::Pause, Some(1))
    };
    let later = Fault {
        restart_after: Some(Duration::from_secs(1)),
        ..fault(30_000, FaultAction::Kill, Some(1))
    };
    let mut injector = Injector::new(
        vec![pause, later],
        1,
        dir.path(),
        Some(Box::new(nodes.clone())),
        now_ns,
    );
    injector.phase_started(Phase::Measurement, now_ns());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(nodes.state(1), 'T');
    let (done, _) = injector.finish();
    assert_ne!(
        nodes.state(1),
        'T',
        "the pause was undone at the end of the run"
    );
    assert!(done[0].ended_ns.is_some());
    assert!(done[1].injected_ns.is_none());
    assert!(done[1].problems[0].contains("ended before"));
}

/// What the injector did with `fault` on one node that was killed before the run.
fn on_a_dead_node(fault: Fault) -> Injected {
    let dir = tempfile::tempdir().unwrap();
    let nodes = Sleepers::new(1);
    nodes.kill_first();
    let mut injector = Injector::new(
        vec![fault],
        1,
        dir.path(),
        Some(Box::new(nodes.clone())),
        now_ns,
    );
    injector.phase_started(Phase::Measurement, now_ns());
    std::thread::sleep(Duration::from_millis(100));
    injector.finish().0.remove(0)
}

#[test]
fn a_fault_on_a_node_that_is_down_is_not_injected_and_says_so() {
    let done = on_a_dead_node(fault(0, FaultAction::Kill, Some(1)));
    assert!(
        done.problems[0].contains("node 1 was not running"),
        "{:?}",
        done.problems
    );
}

#[test]
fn the_leader_is_asked_at_the_injection_and_again_when_the_messages_are_in() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = Sleepers::new(3);
    let first = nodes.pid(1).unwrap();
    let kill = Fault {
        node: Some(FaultNode::Leader),
        ..fault(0, FaultAction::Kill, None)
    };
    let mut injector = Injector::new(
        vec![kill, fault(100, FaultAction::Stop, Some(3))],
        1,
        dir.path(),
        Some(Box::new(nodes.clone())),
        now_ns,
    );
    injector.phase_started(Phase::Measurement, now_ns());
    std::thread::sleep(Duration::from_millis(300));
    injector.drained(now_ns());
    let (done, _) = injector.finish();
    assert_eq!((done[0].node, done[0].pid), (Some(1), Some(first)));
    assert_eq!(
        done[0].chosen.as_deref(),
        Some("leader of stream s at injection")
    );
    assert_eq!(
        (done[0].leader_before, done[0].leader_after),
        (Some(1), Some(2))
    );
    assert_eq!(
        (done[1].leader_before, done[1].leader_after),
        (Some(2), Some(2)),
        "a fault on another node says who led as well"
    );
    assert_eq!(nodes.pid(1), None, "no restart was asked for");
}

#[test]
fn a_leader_that_cannot_be_found_is_not_guessed() {
    let done = on_a_dead_node(Fault {
        node: Some(FaultNode::Leader),
        ..fault(0, FaultAction::Kill, None)
    });
    assert_eq!(done.problems, ["not injected: no node runs"]);
    assert_eq!((done.node, done.pid), (None, None));
}
