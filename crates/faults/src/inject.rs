//! The injector: a thread that, once the measurement window starts, carries out the faults at
//! their times and undoes them (SIGCONT, the undo command, the node started again) when they
//! are due — or at once when the run ends first, so that no node is left paused or down by a
//! fault that asked for its end. It watches the run as an observer, to know when the window
//! starts and to keep the per-second rows the faults are measured with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use brokerbench_model::faults::{Fault, FaultAction, FaultMarks};
use brokerbench_model::{IntervalRow, Phase, RunObserver};

use crate::measure::RunRecord;
use crate::nodes::{self, Nodes};
use crate::{command, partition, schedule};

/// The problem of a fault whose time came after the run ended.
const NOT_INJECTED: &str = "not injected: the run ended before its time";

/// The problem of a partition whose rules dropped no packet.
const NOTHING_DROPPED: &str = "the partition dropped no packet between the nodes: they sent each other nothing while it lasted, or nftables did not see their cgroups (a container with a cgroup namespace of its own); the run measured no partition";

/// What was done for one fault, times in ns since the UNIX epoch.
#[derive(Debug, Clone, Default)]
pub struct Injected {
    /// Position in the schedule, from 0.
    pub index: usize,
    pub fault: Option<Fault>,
    pub node: Option<u32>,
    pub chosen: Option<String>,
    pub pid: Option<u32>,
    /// The leader at the injection, and when the run's messages were in.
    pub leader_before: Option<u32>,
    pub leader_after: Option<u32>,
    pub injected_ns: Option<u64>,
    pub ended_ns: Option<u64>,
    pub restarted_pid: Option<u32>,
    /// A command fault's output file, relative to the results folder.
    pub output: Option<String>,
    pub problems: Vec<String>,
}

/// A run's faults, carried out by a thread of their own.
pub struct Injector {
    plan: Option<Plan>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Injected>>>,
    /// What the thread did, once it has ended.
    done: Option<Vec<Injected>>,
    record: RunRecord,
    /// The nodes, to ask who leads once the run's messages are in (when a fault hits a node).
    nodes: Option<Arc<dyn Nodes>>,
    marks: FaultMarks,
}

/// What the thread needs.
struct Plan {
    faults: Vec<Fault>,
    seed: u64,
    folder: PathBuf,
    nodes: Option<Arc<dyn Nodes>>,
    now_ns: fn() -> u64,
    /// The nftables table of each partition under way, by fault index.
    tables: BTreeMap<usize, String>,
    marks: FaultMarks,
}

impl Injector {
    /// Faults of a run whose results go to `folder`, on `nodes` (None: only command faults),
    /// with `seed` for random nodes and `now_ns` the run's clock.
    pub fn new(
        faults: Vec<Fault>,
        seed: u64,
        folder: &Path,
        nodes: Option<Box<dyn Nodes>>,
        now_ns: fn() -> u64,
    ) -> Self {
        let nodes: Option<Arc<dyn Nodes>> = nodes.map(Arc::from);
        let asked = faults.iter().any(|f| f.node.is_some());
        let marks = FaultMarks::default();
        Injector {
            plan: Some(Plan {
                faults,
                seed,
                folder: folder.to_path_buf(),
                nodes: nodes.clone(),
                now_ns,
                tables: BTreeMap::new(),
                marks: marks.clone(),
            }),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            done: None,
            record: RunRecord::default(),
            nodes: nodes.filter(|_| asked),
            marks,
        }
    }

    /// When each fault is under way, as it happens (for timeseries.csv).
    pub fn marks(&self) -> FaultMarks {
        self.marks.clone()
    }

    /// Ends the faults (undoing what is due at once), and returns what was done and the run's
    /// rows to measure them with.
    pub fn finish(&mut self) -> (Vec<Injected>, RunRecord) {
        self.end_faults();
        let injected = match self.done.take() {
            Some(done) => done,
            None => self.never_started(),
        };
        (injected, std::mem::take(&mut self.record))
    }

    /// Stops the thread, which undoes at once what is due, and keeps what it did.
    fn end_faults(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            self.done = Some(thread.join().unwrap_or_else(|_| {
                vec![Injected {
                    problems: vec!["the fault thread panicked".into()],
                    ..Injected::default()
                }]
            }));
        }
    }

    /// The faults of a run that ended before its measurement window began.
    fn never_started(&mut self) -> Vec<Injected> {
        let faults = self.plan.take().map(|p| p.faults).unwrap_or_default();
        faults
            .into_iter()
            .enumerate()
            .map(|(index, fault)| Injected {
                index,
                fault: Some(fault),
                problems: vec![NOT_INJECTED.into()],
                ..Injected::default()
            })
            .collect()
    }
}

/// A run that returns early (an error) still ends its faults: no node stays paused.
impl Drop for Injector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl RunObserver for Injector {
    fn phase_started(&mut self, phase: Phase, at_ns: u64) {
        match phase {
            Phase::Warmup => self.record.started_ns = at_ns,
            Phase::Measurement => {
                self.record.window_start_ns = at_ns;
                if let Some(plan) = self.plan.take() {
                    let stop = self.stop.clone();
                    self.thread = Some(std::thread::spawn(move || plan.carry_out(at_ns, &stop)));
                }
            }
            Phase::Drain => self.record.window_end_ns = at_ns,
        }
    }

    fn interval(&mut self, row: &IntervalRow) {
        self.record.keep(row);
    }

    /// The run's messages are in: who leads now, while its topics still exist; then the faults
    /// end (a node killed with `restart_after` is started again), so that the driver removes
    /// what the run created from the whole cluster.
    fn drained(&mut self, _at_ns: u64) {
        let leader = self.nodes.as_ref().and_then(|n| n.leader().ok());
        self.end_faults();
        for fault in self.done.iter_mut().flatten() {
            fault.leader_after = fault.node.and(leader.as_ref().map(|l| l.node));
        }
    }
}

/// What is due when: a fault's start, or its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Inject(usize),
    End(usize),
}

impl Plan {
    /// Carries out every step at its time; when `stop` is set, the ends still due at once.
    fn carry_out(mut self, window_start_ns: u64, stop: &AtomicBool) -> Vec<Injected> {
        let mut due: BTreeSet<(u64, Step)> = self
            .faults
            .iter()
            .enumerate()
            .map(|(i, fault)| {
                (
                    window_start_ns + fault.at.as_nanos() as u64,
                    Step::Inject(i),
                )
            })
            .collect();
        let mut done: Vec<Injected> = (0..self.faults.len())
            .map(|index| Injected {
                index,
                fault: Some(self.faults[index].clone()),
                ..Injected::default()
            })
            .collect();
        while let Some((at, step)) = due.pop_first() {
            let stopping = self.sleep_until(at, stop);
            match step {
                Step::Inject(i) if stopping => done[i].problems.push(NOT_INJECTED.into()),
                Step::Inject(i) => {
                    if let Some(end) = self.inject(&mut done[i]) {
                        let from = done[i].injected_ns.unwrap_or(at);
                        due.insert((from + end.as_nanos() as u64, Step::End(i)));
                    }
                }
                Step::End(i) => self.end(&mut done[i]),
            }
        }
        done
    }

    /// Sleeps until `at_ns` in steps, or until `stop`; whether it stopped.
    fn sleep_until(&self, at_ns: u64, stop: &AtomicBool) -> bool {
        loop {
            if stop.load(Ordering::SeqCst) {
                return true;
            }
            let now = (self.now_ns)();
            if now >= at_ns {
                return false;
            }
            std::thread::sleep(Duration::from_nanos((at_ns - now).min(20_000_000)));
        }
    }

    /// Carries out one fault; when it is to end, after how long.
    fn inject(&mut self, record: &mut Injected) -> Option<Duration> {
        let fault = record.fault.clone().expect("a scheduled fault");
        if fault.action == FaultAction::Command {
            return self.start_command(&fault, record);
        }
        // Asked before the injection, while every node answers at once.
        let leader = self.leader();
        record.leader_before = leader.as_ref().ok().map(|l| l.node);
        let count = self.nodes.as_ref().map_or(0, |n| n.count());
        let (node, chosen) =
            match schedule::node_of(fault.node?, record.index, self.seed, count, leader) {
                Ok(pick) => pick,
                Err(problem) => {
                    record.problems.push(format!("not injected: {problem}"));
                    return None;
                }
            };
        record.node = Some(node);
        record.chosen = Some(chosen);
        let Some(pid) = self.nodes.as_ref().and_then(|n| n.pid(node)) else {
            record
                .problems
                .push(format!("not injected: node {node} was not running"));
            return None;
        };
        record.pid = Some(pid);
        self.injected_now(record);
        let outcome = match fault.action {
            FaultAction::Kill => nodes::kill(pid),
            FaultAction::Stop => nodes::stop(pid),
            FaultAction::Partition => self.cut(record.index, node),
            _ => nodes::signal(pid, libc::SIGSTOP),
        };
        if let Err(problem) = outcome {
            record.problems.push(problem);
        }
        fault.lasts.or(fault.restart_after)
    }

    /// The fault is being injected now: its time, and its mark.
    fn injected_now(&self, record: &mut Injected) {
        let now = (self.now_ns)();
        record.injected_ns = Some(now);
        self.marks.begin(record.index + 1, now);
    }

    /// Cuts `node` off from the other nodes, keeping the table that ends it.
    fn cut(&mut self, index: usize, node: u32) -> Result<(), String> {
        let nodes = self.nodes.as_deref().ok_or("no nodes to partition")?;
        let table = partition::cut(index, node, nodes)?;
        self.tables.insert(index, table);
        Ok(())
    }

    /// Ends the fault's partition, if one was made; a cut that dropped nothing is a problem
    /// (the nodes did not talk, or nftables did not see their groups).
    fn heal(&mut self, record: &mut Injected) -> Result<(), String> {
        let Some(table) = self.tables.remove(&record.index) else {
            return Ok(());
        };
        if partition::heal(&table)? == 0 {
            record.problems.push(NOTHING_DROPPED.into());
        }
        Ok(())
    }

    fn leader(&self) -> Result<crate::nodes::Leader, String> {
        match &self.nodes {
            Some(nodes) => nodes.leader(),
            None => Err("no managed broker to ask".into()),
        }
    }

    fn start_command(&mut self, fault: &Fault, record: &mut Injected) -> Option<Duration> {
        let name = format!("fault-{}.log", record.index + 1);
        record.output = Some(name.clone());
        self.injected_now(record);
        let run = fault.run.as_deref().unwrap_or_default();
        if let Err(problem) = command::run(run, "run", &self.folder.join(&name)) {
            record.problems.push(problem);
        }
        fault.lasts
    }

    /// Ends one fault: SIGCONT, the partition's table deleted, the undo command, or the node
    /// started again.
    fn end(&mut self, record: &mut Injected) {
        let fault = record.fault.clone().expect("a scheduled fault");
        let outcome = match (fault.action, record.pid, record.node) {
            (FaultAction::Command, _, _) => match &fault.undo {
                Some(undo) => {
                    let log = self
                        .folder
                        .join(record.output.as_deref().unwrap_or("fault.log"));
                    command::run(undo, "undo", &log)
                }
                None => Ok(()),
            },
            (FaultAction::Pause, Some(pid), _) => nodes::signal(pid, libc::SIGCONT),
            (FaultAction::Partition, _, _) => self.heal(record),
            (FaultAction::Kill | FaultAction::Stop, _, Some(node)) => self.restart(node, record),
            _ => Ok(()),
        };
        match outcome {
            Ok(()) => {
                let now = (self.now_ns)();
                record.ended_ns = Some(now);
                self.marks.end(record.index + 1, now);
            }
            Err(problem) => record.problems.push(problem),
        }
    }

    fn restart(&mut self, node: u32, record: &mut Injected) -> Result<(), String> {
        let nodes = self.nodes.as_ref().ok_or("no nodes to restart")?;
        let pid = nodes
            .restart(node)
            .map_err(|e| format!("node {node} could not be started again: {e}"))?;
        record.restarted_pid = Some(pid);
        Ok(())
    }
}
