//! Per-process sampling: which processes a target covers, their CPU, memory, storage I/O and
//! threads, and finding a broker process by name.
//!
//! Counting a process tree. For a target with descendants, the CPU and I/O counters of the
//! tree are `Σ over live members of (own + reaped children)`: `utime + cutime`,
//! `stime + cstime` and `/proc/PID/io` (which already includes reaped children). That sum
//! only grows while processes are born and reaped inside the tree, so short-lived children
//! (started and reaped between two samples) are counted too. The interval value is the sum
//! now minus the previous readings of the members that are still members or that died; a
//! member that left the tree alive (re-parented, e.g. a daemon that double-forks) is not
//! subtracted and its last interval is lost. A member that died but was reaped outside the
//! tree makes the interval value too small (never negative: it is clamped at 0).

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;

use crate::procfs::{self, ProcIo, ProcStat};
use crate::source::ProcSource;

/// Which side of the benchmark a monitored process is. The set is closed: resources.csv and
/// the summary have fixed columns for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The broker under test (a local process: managed by brokerbench or named by the user).
    Broker,
    /// The benchmark client: this process, with its producers, consumers and the monitor.
    Client,
}

impl Role {
    /// Lower-case name, used as the column prefix in resources.csv.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Broker => "broker",
            Role::Client => "client",
        }
    }
}

/// Finds the process again after it was lost (a managed broker restarted under a new pid):
/// the pid it runs as now, if it runs.
#[derive(Clone)]
pub struct Refind(pub std::sync::Arc<dyn Fn() -> Option<u32> + Send + Sync>);

impl std::fmt::Debug for Refind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Refind")
    }
}

impl PartialEq for Refind {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Refind {}

/// A process (tree) to monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Broker or client; at most one target per role.
    pub role: Role,
    /// Process id of the root of the tree.
    pub root_pid: u32,
    /// Whether to count every descendant of the root too (re-scanned each sample, so children
    /// started later count). Threads always count: they are part of their process.
    pub include_descendants: bool,
    /// How to find the process again once it is gone; None: a lost process stays lost.
    pub refind: Option<Refind>,
    /// The node of a broker of several nodes this process is (1 to N), if known.
    pub node: Option<u32>,
}

impl Target {
    /// The broker: `pid` and all its descendants (a start script's JVM, helper processes).
    pub fn broker(pid: u32) -> Target {
        Target {
            role: Role::Broker,
            root_pid: pid,
            include_descendants: true,
            refind: None,
            node: None,
        }
    }

    /// Node `id` of a broker of several nodes.
    pub fn of_node(mut self, id: u32) -> Target {
        self.node = Some(id);
        self
    }

    /// Follows the process to its new pid when it is gone and `refind` finds it again.
    pub fn following(mut self, refind: impl Fn() -> Option<u32> + Send + Sync + 'static) -> Target {
        self.refind = Some(Refind(std::sync::Arc::new(refind)));
        self
    }

    /// The client: this process only. Descendants are left out because a managed local
    /// broker may be a child of this process and must not be counted twice.
    pub fn client() -> Target {
        Target {
            role: Role::Client,
            root_pid: std::process::id(),
            include_descendants: false,
            refind: None,
            node: None,
        }
    }
}

/// One target at one sample. Interval values cover the time since the previous sample
/// (`Sample::interval_s`) and are `None` on the first sample, after the process is lost, or
/// when the counter could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// Broker or client.
    pub role: Role,
    /// Process id of the root of the tree.
    pub root_pid: u32,
    /// The broker node it is, as its target says.
    pub node: Option<u32>,
    /// Whether the root process is running (false once it exited, became a zombie, or was
    /// never found; a lost process stays lost even if its pid is reused).
    pub alive: bool,
    /// When the root process was first found gone, ns since the UNIX epoch (the time of the
    /// first sample that did not find it alive).
    pub lost_at_ns: Option<u64>,
    /// Number of processes counted in this sample (root + live descendants).
    pub processes: u32,
    /// User-mode CPU in the interval, percent of one core.
    pub cpu_user_pct: Option<f64>,
    /// Kernel-mode CPU in the interval, percent of one core.
    pub cpu_system_pct: Option<f64>,
    /// Resident set size now, bytes, summed over the processes (shared pages count once per
    /// process, as in `ps`).
    pub rss_bytes: Option<u64>,
    /// Bytes read from storage in the interval (`read_bytes` of `/proc/PID/io`); `None` when
    /// that file is not readable (another user's process without CAP_SYS_PTRACE).
    pub disk_read_bytes: Option<u64>,
    /// Bytes written to storage in the interval (`write_bytes − cancelled_write_bytes`);
    /// `None` when `/proc/PID/io` is not readable.
    pub disk_written_bytes: Option<u64>,
    /// Threads now, summed over the processes.
    pub threads: Option<u64>,
}

/// Cumulative counters of one member process, in the "own + reaped children" form.
#[derive(Debug, Clone, Copy)]
struct MemberReading {
    /// Start time after boot, ticks: tells a reused pid from the process we saw.
    starttime: u64,
    /// User CPU, ticks.
    user_ticks: u64,
    /// System CPU, ticks.
    system_ticks: u64,
    /// Storage I/O, bytes; None when unreadable.
    io: Option<ProcIo>,
}

/// Sum of cumulative counters over a set of member readings.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    user_ticks: u64,
    system_ticks: u64,
    read_bytes: u64,
    write_bytes: u64,
    cancelled_write_bytes: u64,
    io_complete: bool,
}

impl Totals {
    fn add(&mut self, reading: &MemberReading) {
        self.user_ticks += reading.user_ticks;
        self.system_ticks += reading.system_ticks;
        match reading.io {
            Some(io) => {
                self.read_bytes += io.read_bytes;
                self.write_bytes += io.write_bytes;
                self.cancelled_write_bytes += io.cancelled_write_bytes;
            }
            None => self.io_complete = false,
        }
    }
}

/// Processes of the host by pid.
pub(crate) type Processes = HashMap<u32, ProcStat>;

/// Reads `/proc/PID/stat` of every process.
fn read_all_processes(buffer: &mut String) -> Processes {
    procfs::list_pids()
        .into_iter()
        .filter_map(|pid| {
            procfs::read_into(format!("/proc/{pid}/stat"), buffer).ok()?;
            Some((pid, procfs::parse_stat(buffer)?))
        })
        .collect()
}

/// The monitoring state of one target between samples.
#[derive(Debug)]
pub(crate) struct TargetState {
    pub target: Target,
    /// Start time of the root when first seen, ticks after boot.
    root_starttime: Option<u64>,
    lost_at_ns: Option<u64>,
    /// Readings of the members at the previous sample, by pid.
    previous: HashMap<u32, MemberReading>,
    has_previous: bool,
}

/// The broker's samples when it has several nodes (one target each), else none.
pub fn broker_nodes(samples: &[ProcessSample]) -> Vec<ProcessSample> {
    let nodes: Vec<ProcessSample> = samples
        .iter()
        .filter(|s| s.role == Role::Broker)
        .cloned()
        .collect();
    match nodes.len() {
        0 | 1 => Vec::new(),
        _ => nodes,
    }
}

/// One sample per role, in the order each role first appears: the samples of the targets of
/// one role (the nodes of a broker) summed. The sum is alive while any member is; it is lost
/// when every member is (at the latest loss); an interval value is known when any member's is.
pub fn sum_by_role(samples: Vec<ProcessSample>) -> Vec<ProcessSample> {
    let mut summed: Vec<ProcessSample> = Vec::with_capacity(samples.len());
    for sample in samples {
        match summed.iter_mut().find(|s| s.role == sample.role) {
            Some(total) => add_sample(total, &sample),
            None => summed.push(sample),
        }
    }
    summed
}

fn add_sample(total: &mut ProcessSample, more: &ProcessSample) {
    fn add<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        }
    }
    total.lost_at_ns = match (total.alive, more.alive) {
        (false, false) => total.lost_at_ns.max(more.lost_at_ns),
        _ => None,
    };
    total.alive |= more.alive;
    total.processes += more.processes;
    total.cpu_user_pct = add(total.cpu_user_pct, more.cpu_user_pct);
    total.cpu_system_pct = add(total.cpu_system_pct, more.cpu_system_pct);
    total.rss_bytes = add(total.rss_bytes, more.rss_bytes);
    total.disk_read_bytes = add(total.disk_read_bytes, more.disk_read_bytes);
    total.disk_written_bytes = add(total.disk_written_bytes, more.disk_written_bytes);
    total.threads = add(total.threads, more.threads);
}

/// Constants needed to turn ticks and pages into percent and bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Units {
    pub ticks_per_second: f64,
    pub page_size: u64,
}

impl TargetState {
    pub fn new(target: Target) -> TargetState {
        TargetState {
            target,
            root_starttime: None,
            lost_at_ns: None,
            previous: HashMap::new(),
            has_previous: false,
        }
    }

    /// Whether the root process has been found gone.
    pub fn is_lost(&self) -> bool {
        self.lost_at_ns.is_some()
    }

    /// A lost process found again (restarted under a new pid) is sampled from then on, from
    /// scratch: the sample that finds it sets the baseline.
    pub fn follow(&mut self) {
        if self.lost_at_ns.is_none() {
            return;
        }
        let found = self.target.refind.as_ref().and_then(|r| (r.0)());
        if let Some(pid) = found.filter(|&pid| pid != self.target.root_pid) {
            self.target.root_pid = pid;
            self.root_starttime = None;
            self.lost_at_ns = None;
            self.previous.clear();
            self.has_previous = false;
        }
    }

    /// Takes one sample. `table` holds the host's processes (fresh for tree members); it
    /// must be given when this target counts descendants, and is not used otherwise (then
    /// only the root is read). `elapsed_s` is the real time since
    /// the previous sample, `None` on the first.
    pub fn sample(
        &mut self,
        now_ns: u64,
        elapsed_s: Option<f64>,
        table: Option<&Processes>,
        units: Units,
        source: &mut impl ProcSource,
    ) -> ProcessSample {
        let root = self.target.root_pid;
        let mut sample = self.empty_sample();
        if self.lost_at_ns.is_some() {
            return sample;
        }
        let table = table.filter(|_| self.target.include_descendants);
        let Some(root_stat) = self.running_root(table, source, now_ns) else {
            sample.lost_at_ns = self.lost_at_ns;
            return sample;
        };
        sample.alive = true;

        let members: Vec<(u32, ProcStat)> = match table {
            Some(table) => descendants(root, table)
                .into_iter()
                .filter_map(|pid| Some((pid, *table.get(&pid)?)))
                .collect(),
            None => vec![(root, root_stat)],
        };
        let readings = self.read_members(&members, source);
        sample.processes = readings.by_pid.len() as u32;
        sample.rss_bytes = Some(readings.rss_pages * units.page_size);
        sample.threads = Some(readings.threads);

        if let (Some(elapsed_s), true) = (elapsed_s, self.has_previous) {
            let before = self.previous_totals(&readings.by_pid, table);
            set_interval_values(&mut sample, &readings.totals, &before, elapsed_s, units);
        }
        self.previous = readings.by_pid;
        self.has_previous = true;
        sample
    }

    /// This target's sample with nothing read yet: not alive, no values.
    fn empty_sample(&self) -> ProcessSample {
        ProcessSample {
            role: self.target.role,
            root_pid: self.target.root_pid,
            node: self.target.node,
            alive: false,
            lost_at_ns: self.lost_at_ns,
            processes: 0,
            cpu_user_pct: None,
            cpu_system_pct: None,
            rss_bytes: None,
            disk_read_bytes: None,
            disk_written_bytes: None,
            threads: None,
        }
    }

    /// The root's `stat`, from `table` when given, while it runs as the process first seen
    /// (whose start time it keeps); else the target is lost from `now_ns` on, and None.
    fn running_root(
        &mut self,
        table: Option<&Processes>,
        source: &mut impl ProcSource,
        now_ns: u64,
    ) -> Option<ProcStat> {
        let root = self.target.root_pid;
        let root_stat = match table {
            Some(table) => table.get(&root).copied(),
            None => source.stat(root),
        };
        match root_stat {
            Some(stat)
                if !stat.exited()
                    && self
                        .root_starttime
                        .is_none_or(|start| start == stat.starttime) =>
            {
                self.root_starttime = Some(stat.starttime);
                Some(stat)
            }
            _ => {
                self.lost_at_ns = Some(now_ns);
                self.previous.clear();
                None
            }
        }
    }

    /// Reads each member's counters (with its reaped children's when the target counts
    /// descendants) and sums them.
    fn read_members(
        &self,
        members: &[(u32, ProcStat)],
        source: &mut impl ProcSource,
    ) -> MemberReadings {
        let root = self.target.root_pid;
        let with_reaped = self.target.include_descendants;
        let mut current = HashMap::with_capacity(members.len());
        let mut now = Totals {
            io_complete: true,
            ..Totals::default()
        };
        let (mut rss_pages, mut threads) = (0, 0);
        for (pid, stat) in members {
            let io = match source.io(*pid) {
                Ok(io) => io,
                Err(error) if error.kind() == io::ErrorKind::PermissionDenied => None,
                // Gone since the process table was read: counted as a member that died.
                Err(_) if *pid != root => continue,
                Err(_) => None,
            };
            // An exited member may refuse its counters; they no longer change.
            let io = io.or_else(|| {
                stat.exited().then(|| {
                    self.previous
                        .get(pid)
                        .and_then(|r| r.io)
                        .unwrap_or_default()
                })
            });
            let reading = MemberReading {
                starttime: stat.starttime,
                user_ticks: stat.utime + if with_reaped { stat.cutime } else { 0 },
                system_ticks: stat.stime + if with_reaped { stat.cstime } else { 0 },
                io,
            };
            now.add(&reading);
            rss_pages += stat.rss_pages;
            threads += stat.num_threads;
            current.insert(*pid, reading);
        }
        MemberReadings {
            by_pid: current,
            totals: now,
            rss_pages,
            threads,
        }
    }

    /// The previous readings summed, of processes that are still members, or that died
    /// (their counters moved into the reaper); not of processes that left the tree alive.
    fn previous_totals(
        &self,
        current: &HashMap<u32, MemberReading>,
        table: Option<&Processes>,
    ) -> Totals {
        let mut before = Totals {
            io_complete: true,
            ..Totals::default()
        };
        for (pid, reading) in &self.previous {
            let same_process_now = |starttime: u64| starttime == reading.starttime;
            let still_member = current
                .get(pid)
                .is_some_and(|r: &MemberReading| same_process_now(r.starttime));
            let still_elsewhere = table.is_some_and(|t| {
                t.get(pid)
                    .is_some_and(|s| same_process_now(s.starttime) && !s.exited())
            });
            if still_member || !still_elsewhere {
                before.add(reading);
            }
        }
        before
    }
}

/// The members' readings at one sample, and their sums.
struct MemberReadings {
    /// Each member's counters, by pid.
    by_pid: HashMap<u32, MemberReading>,
    /// The counters summed over the members.
    totals: Totals,
    /// Resident pages, summed.
    rss_pages: u64,
    /// Threads, summed.
    threads: u64,
}

/// Sets the interval values of `sample` from the counters' sums now and at the previous
/// sample `elapsed_s` ago: CPU in percent of one core, and bytes read and written.
fn set_interval_values(
    sample: &mut ProcessSample,
    now: &Totals,
    before: &Totals,
    elapsed_s: f64,
    units: Units,
) {
    let per_second = |ticks_now: u64, ticks_before: u64| {
        ticks_now.saturating_sub(ticks_before) as f64 / units.ticks_per_second / elapsed_s * 100.0
    };
    if elapsed_s > 0.0 {
        sample.cpu_user_pct = Some(per_second(now.user_ticks, before.user_ticks));
        sample.cpu_system_pct = Some(per_second(now.system_ticks, before.system_ticks));
    }
    if now.io_complete && before.io_complete {
        sample.disk_read_bytes = Some(now.read_bytes.saturating_sub(before.read_bytes));
        let written_now = now.write_bytes as i128 - now.cancelled_write_bytes as i128;
        let written_before = before.write_bytes as i128 - before.cancelled_write_bytes as i128;
        sample.disk_written_bytes = Some((written_now - written_before).max(0) as u64);
    }
}

/// `root` and every process whose parent chain leads to it.
pub(crate) fn descendants(root: u32, table: &Processes) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, stat) in table {
        if pid != root {
            children.entry(stat.ppid).or_default().push(pid);
        }
    }
    let mut members = vec![root];
    let mut next = 0;
    while next < members.len() {
        if let Some(kids) = children.get(&members[next]) {
            members.extend_from_slice(kids);
        }
        next += 1;
    }
    members
}

/// Finds running processes by name, for `--broker-process NAME`. A process matches when
///
/// 1. its command name (`/proc/PID/comm`, at most 15 bytes) equals `name`, or equals the
///    first 15 bytes of a longer `name`; or
/// 2. the file name of its first argument (`argv[0]` with any directory stripped) equals
///    `name`; or
/// 3. any later argument (`argv[1..]`) contains `name` as a substring (so `kafka.Kafka`
///    finds `java ... kafka.Kafka config/server.properties`).
///
/// Left out: this process and its ancestors (whose command lines carry the name as an
/// option), exited (zombie) processes, and every match that descends from another match,
/// because a broker target counts descendants anyway (a start script and the JVM it forks
/// give one pid, the script's). The result is sorted by pid; more than one pid means the
/// name is ambiguous and the caller should ask for a pid.
pub fn find_pids_by_name(name: &str) -> Vec<u32> {
    if name.is_empty() {
        return Vec::new();
    }
    let mut buffer = String::new();
    let table = read_all_processes(&mut buffer);
    let mut excluded = HashSet::new();
    let mut pid = std::process::id();
    while pid > 1 && excluded.insert(pid) {
        match table.get(&pid) {
            Some(stat) => pid = stat.ppid,
            None => break,
        }
    }
    let comm_name = truncate_to_comm(name);
    let mut matches: HashSet<u32> = HashSet::new();
    for (&pid, stat) in &table {
        if excluded.contains(&pid) || stat.exited() {
            continue;
        }
        let comm_matches = procfs::read_into(format!("/proc/{pid}/comm"), &mut buffer).is_ok()
            && buffer.trim_end_matches('\n') == comm_name;
        if comm_matches || cmdline_matches(Path::new(&format!("/proc/{pid}/cmdline")), name) {
            matches.insert(pid);
        }
    }
    let mut top: Vec<u32> = matches
        .iter()
        .copied()
        .filter(|&pid| !has_matching_ancestor(pid, &matches, &table))
        .collect();
    top.sort_unstable();
    top
}

/// The kernel keeps at most 15 bytes of a command name; cut `name` the same way (on a
/// character boundary).
fn truncate_to_comm(name: &str) -> &str {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

fn cmdline_matches(path: &Path, name: &str) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let args = procfs::parse_cmdline(&bytes);
    let Some((first, rest)) = args.split_first() else {
        return false;
    };
    let base = first.rsplit('/').next().unwrap_or(first);
    base == name || rest.iter().any(|arg| arg.contains(name))
}

fn has_matching_ancestor(pid: u32, matches: &HashSet<u32>, table: &Processes) -> bool {
    let mut seen = HashSet::new();
    let mut current = pid;
    while let Some(stat) = table.get(&current) {
        let parent = stat.ppid;
        if parent == 0 || !seen.insert(parent) {
            return false;
        }
        if matches.contains(&parent) {
            return true;
        }
        current = parent;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(ppid: u32) -> ProcStat {
        ProcStat {
            state: b'S',
            ppid,
            utime: 0,
            stime: 0,
            cutime: 0,
            cstime: 0,
            num_threads: 1,
            starttime: 0,
            rss_pages: 0,
        }
    }

    #[test]
    fn descendants_follow_the_parent_chain() {
        let table: Processes = [(1, stat(0)), (10, stat(1)), (11, stat(10)), (12, stat(11))]
            .into_iter()
            .chain([(20, stat(1)), (21, stat(20))])
            .collect();
        let mut tree = descendants(10, &table);
        tree.sort();
        assert_eq!(tree, vec![10, 11, 12]);
        assert_eq!(descendants(21, &table), vec![21]);
    }

    fn node(role: Role, alive: bool, cpu: Option<f64>, rss: Option<u64>) -> ProcessSample {
        ProcessSample {
            role,
            root_pid: 1,
            node: None,
            alive,
            lost_at_ns: (!alive).then_some(5),
            processes: u32::from(alive),
            cpu_user_pct: cpu,
            cpu_system_pct: cpu,
            rss_bytes: rss,
            disk_read_bytes: None,
            disk_written_bytes: Some(10),
            threads: Some(2),
        }
    }

    #[test]
    fn the_nodes_of_a_broker_are_summed_into_one_sample() {
        let client = node(Role::Client, true, Some(1.0), Some(1));
        let samples = vec![
            node(Role::Broker, true, Some(20.0), Some(100)),
            client.clone(),
            node(Role::Broker, false, None, None),
            node(Role::Broker, true, Some(30.0), Some(200)),
        ];
        let summed = sum_by_role(samples);
        assert_eq!(summed.len(), 2);
        let broker = &summed[0];
        assert_eq!(broker.role, Role::Broker);
        assert!(broker.alive && broker.lost_at_ns.is_none(), "{broker:?}");
        assert_eq!(broker.processes, 2);
        assert_eq!(broker.cpu_user_pct, Some(50.0));
        assert_eq!(broker.rss_bytes, Some(300));
        assert_eq!(broker.disk_written_bytes, Some(30));
        assert_eq!(broker.disk_read_bytes, None);
        assert_eq!(broker.threads, Some(6));
        assert_eq!(summed[1], client, "the client is left as it was");
        let all_lost = sum_by_role(vec![
            node(Role::Broker, false, None, None),
            node(Role::Broker, false, None, None),
        ]);
        assert!(!all_lost[0].alive && all_lost[0].lost_at_ns == Some(5));
    }

    #[test]
    fn comm_names_are_cut_like_the_kernel() {
        assert_eq!(truncate_to_comm("kafka-server-start"), "kafka-server-st");
        assert_eq!(truncate_to_comm("redis"), "redis");
    }
}
