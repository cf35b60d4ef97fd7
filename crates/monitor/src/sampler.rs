//! One sampler for the targets and the host: keeps the previous readings and turns the next
//! reading into interval values. Rates divide by the real (monotonic) time elapsed between
//! the two readings; sample timestamps come from the caller's clock.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::host::{HostSample, HostState};
use crate::process::{ProcessSample, Role, Target, TargetState, Units};
use crate::procfs;
use crate::source::{ProcFiles, ProcSource};
use crate::table::ProcessTable;
use crate::MonitorError;

/// Everything measured at one instant, with interval values since the previous sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// When the sample was taken, ns since the UNIX epoch (the caller's clock).
    pub time_ns: u64,
    /// Real time since the previous sample, seconds (monotonic clock); `None` for the first
    /// sample, which only sets the baseline for interval values.
    pub interval_s: Option<f64>,
    /// One entry per role (broker, client), in the order the targets were given; a broker
    /// of several nodes is their sum.
    pub processes: Vec<ProcessSample>,
    /// Each node of a broker of several nodes, in the order its targets were given (node 1
    /// first); empty for a broker of one node.
    pub nodes: Vec<ProcessSample>,
    /// The host.
    pub host: HostSample,
}

impl Sample {
    /// The sample of the target with this role, if one is monitored.
    pub fn process(&self, role: Role) -> Option<&ProcessSample> {
        self.processes.iter().find(|p| p.role == role)
    }
}

/// Samples processes and host on demand; see [`crate::Monitor`] for sampling on a timer.
/// Reads `/proc` through `S` ([`ProcFiles`], brokerbench's own parsers, unless given another).
#[derive(Debug)]
pub struct Sampler<S = ProcFiles> {
    targets: Vec<TargetState>,
    host: HostState,
    table: ProcessTable,
    units: Units,
    previous_instant: Option<Instant>,
    source: S,
}

impl Sampler {
    /// A sampler for `targets` (one client at most; one broker target per node of the broker,
    /// summed; none is fine: host only).
    pub fn new(targets: Vec<Target>) -> Result<Sampler, MonitorError> {
        Sampler::with_source(targets, ProcFiles::default())
    }
}

impl<S: ProcSource> Sampler<S> {
    /// A sampler for `targets` reading `/proc` through `source`.
    pub fn with_source(targets: Vec<Target>, source: S) -> Result<Sampler<S>, MonitorError> {
        // A broker of several nodes is several broker targets, summed into one; there is
        // one client.
        for (i, target) in targets.iter().enumerate() {
            let repeated = targets[..i].iter().any(|t| t.role == target.role);
            if repeated && target.role == Role::Client {
                return Err(MonitorError::DuplicateRole(target.role.as_str()));
            }
        }
        Ok(Sampler {
            targets: targets.into_iter().map(TargetState::new).collect(),
            host: HostState::default(),
            table: ProcessTable::default(),
            units: Units {
                ticks_per_second: procfs::clock_ticks_per_second() as f64,
                page_size: procfs::page_size(),
            },
            previous_instant: None,
            source,
        })
    }

    /// The targets, in the order given.
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter().map(|t| &t.target)
    }

    /// Reads everything now; `now_ns` is the timestamp to record (ns since the UNIX epoch).
    /// Never fails: what cannot be read is `None` in the sample.
    pub fn sample(&mut self, now_ns: u64) -> Sample {
        let instant = Instant::now();
        let interval_s = self
            .previous_instant
            .map(|previous| instant.duration_since(previous).as_secs_f64());
        self.previous_instant = Some(instant);

        for target in &mut self.targets {
            target.follow();
        }
        let tree_roots: Vec<u32> = self
            .targets
            .iter()
            .filter(|t| t.target.include_descendants && !t.is_lost())
            .map(|t| t.target.root_pid)
            .collect();
        let table = if tree_roots.is_empty() {
            None
        } else {
            self.table.refresh(&tree_roots, &mut self.source);
            Some(self.table.processes())
        };
        let processes: Vec<ProcessSample> = self
            .targets
            .iter_mut()
            .map(|target| target.sample(now_ns, interval_s, table, self.units, &mut self.source))
            .collect();
        let nodes = crate::process::broker_nodes(&processes);
        let processes = crate::process::sum_by_role(processes);
        let host = self.host.sample(&mut self.source);
        Sample {
            time_ns: now_ns,
            interval_s,
            processes,
            nodes,
            host,
        }
    }
}

/// Now from the system clock, ns since the UNIX epoch; for callers without a run clock.
pub fn system_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
