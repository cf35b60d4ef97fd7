//! Counting a process tree between samples: each member's cumulative counters (with its
//! reaped children's), the tree's members, and the interval values from two sums.

use std::collections::HashMap;
use std::io;

use super::target::{ProcessSample, Target};
use crate::procfs::{ProcIo, ProcStat};
use crate::source::ProcSource;

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
}
