//! Is brokerbench's own `/proc` parsing cheaper per sample than the `procfs` crate?
//!
//! Takes SAMPLES back-to-back samples of the same targets — this process as the client, a
//! broker-like process tree (a spawned `sh` with two `sleep` children, or BROKER_PID and all
//! its descendants), and the host — once with brokerbench's [`Sampler`] (the call the
//! monitor thread makes each tick) and once with a replica of that sampler whose `/proc`
//! reading and parsing goes through the `procfs` crate, in two ways:
//!
//! - `procfs-process`: the crate's process API, `Process::new(pid)?.stat()` / `.io()` (one
//!   extra `openat(O_PATH)` of `/proc/PID` per process read);
//! - `procfs-parsers`: only the crate's parsers on the same paths, `Stat::from_file`,
//!   `Io::from_file` (the same open/read/close as brokerbench).
//!
//! Host side, both: `KernelStats`, `LoadAverage`, `Meminfo`, `diskstats()`,
//! `net::dev_status()`. Everything else is the same algorithm as brokerbench's sampler: the
//! same process-table cache (stats re-read only for new, changed or member pids; all every
//! 60 refreshes), the same tree walk, the same deltas and the same `Sample` values, so the
//! difference is the reading and parsing. The variants alternate in ROUNDS rounds (order
//! rotated each round); each round reports per sample the mean and median wall time, the
//! thread CPU time (`CLOCK_THREAD_CPUTIME_ID`; user/system split from `getrusage`), and the
//! heap allocations (a counting global allocator). Medians over the rounds and the ratios to
//! brokerbench close the output, after a check that both read the same figures.
//!
//! `cargo run --release -p brokerbench-monitor --example procfs_cost [SAMPLES] [ROUNDS] [BROKER_PID]`
//! (defaults 2000, 5, a spawned tree).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::os::unix::fs::DirEntryExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use brokerbench_monitor::{
    system_clock_ns, DeviceIo, HostCpu, HostSample, InterfaceIo, ProcessSample, Role, Sample,
    Sampler, Target,
};
use procfs::process::{Io, Process, Stat};
use procfs::{Current, CurrentSI, FromRead, KernelStats, LoadAverage, Meminfo, ProcError};

// ---------------------------------------------------------------------------------------
// Measuring

/// Counts heap allocations (alloc, alloc_zeroed, realloc) and the bytes asked for.
struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; counting has no effect
// on the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// CPU time of this thread, user + system, ns.
fn thread_cpu_ns() -> u64 {
    // SAFETY: timespec is plain data that clock_gettime fills in.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User and system CPU time of this thread, µs (tick-sampled split of the total).
fn thread_user_system_us() -> (f64, f64) {
    // SAFETY: rusage is plain data that getrusage fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (us(usage.ru_utime), us(usage.ru_stime))
}

/// Per-sample figures of one round of one variant.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    wall_mean_us: f64,
    wall_median_us: f64,
    cpu_us: f64,
    user_us: f64,
    system_us: f64,
    allocations: f64,
    allocated_bytes: f64,
}

fn measure(samples: usize, walls: &mut Vec<f64>, mut sample: impl FnMut() -> Sample) -> Round {
    walls.clear();
    let (user_before, system_before) = thread_user_system_us();
    let cpu_before = thread_cpu_ns();
    let allocations_before = ALLOCATIONS.load(Ordering::Relaxed);
    let bytes_before = ALLOCATED_BYTES.load(Ordering::Relaxed);
    let started = Instant::now();
    for _ in 0..samples {
        let t = Instant::now();
        black_box(sample());
        walls.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let wall_total_us = started.elapsed().as_secs_f64() * 1e6;
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations_before;
    let bytes = ALLOCATED_BYTES.load(Ordering::Relaxed) - bytes_before;
    let cpu_ns = thread_cpu_ns() - cpu_before;
    let (user_after, system_after) = thread_user_system_us();
    let n = samples as f64;
    Round {
        wall_mean_us: wall_total_us / n,
        wall_median_us: median(walls),
        cpu_us: cpu_ns as f64 / 1e3 / n,
        user_us: (user_after - user_before) / n,
        system_us: (system_after - system_before) / n,
        allocations: allocations as f64 / n,
        allocated_bytes: bytes as f64 / n,
    }
}

/// One figure of a [`Round`].
type RoundField = fn(&Round) -> f64;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

// ---------------------------------------------------------------------------------------
// The same sampler, reading /proc through the procfs crate

/// How the procfs side opens a process's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// `Process::new(pid)?.stat()` / `.io()`: the crate's process API.
    Process,
    /// `Stat::from_file("/proc/PID/stat")` / `Io::from_file(..)`: only the crate's parsers.
    Path,
}

fn read_stat(open: Open, pid: u32) -> Result<Stat, ProcError> {
    match open {
        Open::Process => Process::new(pid as i32)?.stat(),
        Open::Path => Stat::from_file(format!("/proc/{pid}/stat")),
    }
}

fn read_io(open: Open, pid: u32) -> Result<Io, ProcError> {
    match open {
        Open::Process => Process::new(pid as i32)?.io(),
        Open::Path => Io::from_file(format!("/proc/{pid}/io")),
    }
}

/// The fields of a procfs `Stat` the sampler keeps (brokerbench's table keeps the same).
#[derive(Debug, Clone, Copy)]
struct ProcStat {
    state: char,
    ppid: u32,
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
    num_threads: u64,
    starttime: u64,
    rss_pages: u64,
}

impl ProcStat {
    fn from_procfs(stat: &Stat) -> ProcStat {
        ProcStat {
            state: stat.state,
            ppid: stat.ppid as u32,
            utime: stat.utime,
            stime: stat.stime,
            cutime: stat.cutime.max(0) as u64,
            cstime: stat.cstime.max(0) as u64,
            num_threads: stat.num_threads.max(0) as u64,
            starttime: stat.starttime,
            rss_pages: stat.rss,
        }
    }

    fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

type Processes = HashMap<u32, ProcStat>;

/// brokerbench's `ProcessTable`, stats read through procfs. procfs has no way to get the
/// inode number of a `/proc/PID` entry, so the listing stays `std::fs::read_dir` (as in
/// brokerbench); `procfs::process::all_processes()` would open every `/proc/PID` as well.
#[derive(Debug, Default)]
struct ProcessTable {
    stats: Processes,
    inodes: HashMap<u32, u64>,
    members: HashSet<u32>,
    refreshes: u64,
}

const FULL_SCAN_EVERY: u64 = 60;

impl ProcessTable {
    fn refresh(&mut self, roots: &[u32], open: Open) {
        let full_scan = self.refreshes.is_multiple_of(FULL_SCAN_EVERY);
        self.refreshes += 1;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            self.stats.clear();
            return;
        };
        let mut listed: HashMap<u32, u64> = HashMap::with_capacity(self.stats.len() + 16);
        for entry in entries.flatten() {
            if let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                listed.insert(pid, entry.ino());
            }
        }
        self.stats.retain(|pid, _| listed.contains_key(pid));
        self.inodes.retain(|pid, _| listed.contains_key(pid));
        for (&pid, &inode) in &listed {
            let cached = self.inodes.get(&pid) == Some(&inode) && self.stats.contains_key(&pid);
            if cached && !full_scan && !self.members.contains(&pid) && !roots.contains(&pid) {
                continue;
            }
            match read_stat(open, pid) {
                Ok(stat) => {
                    self.stats.insert(pid, ProcStat::from_procfs(&stat));
                    self.inodes.insert(pid, inode);
                }
                Err(_) => {
                    self.stats.remove(&pid);
                    self.inodes.remove(&pid);
                }
            }
        }
        self.members = roots
            .iter()
            .filter(|root| self.stats.contains_key(root))
            .flat_map(|&root| descendants(root, &self.stats))
            .collect();
    }
}

fn descendants(root: u32, table: &Processes) -> Vec<u32> {
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

#[derive(Debug, Clone, Copy, Default)]
struct IoCounters {
    read_bytes: u64,
    write_bytes: u64,
    cancelled_write_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct MemberReading {
    starttime: u64,
    user_ticks: u64,
    system_ticks: u64,
    io: Option<IoCounters>,
}

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

/// brokerbench's `TargetState`, reading through procfs.
#[derive(Debug)]
struct TargetState {
    target: Target,
    root_starttime: Option<u64>,
    lost_at_ns: Option<u64>,
    previous: HashMap<u32, MemberReading>,
    has_previous: bool,
}

impl TargetState {
    fn new(target: Target) -> TargetState {
        TargetState {
            target,
            root_starttime: None,
            lost_at_ns: None,
            previous: HashMap::new(),
            has_previous: false,
        }
    }

    fn sample(
        &mut self,
        now_ns: u64,
        elapsed_s: Option<f64>,
        table: Option<&Processes>,
        units: (f64, u64),
        open: Open,
    ) -> ProcessSample {
        let (ticks_per_second, page_size) = units;
        let root = self.target.root_pid;
        let mut sample = ProcessSample {
            role: self.target.role,
            root_pid: root,
            alive: false,
            lost_at_ns: self.lost_at_ns,
            processes: 0,
            cpu_user_pct: None,
            cpu_system_pct: None,
            rss_bytes: None,
            disk_read_bytes: None,
            disk_written_bytes: None,
            threads: None,
        };
        if self.lost_at_ns.is_some() {
            return sample;
        }
        let table = table.filter(|_| self.target.include_descendants);
        let root_stat = match table {
            Some(table) => table.get(&root).copied(),
            None => read_stat(open, root)
                .ok()
                .map(|stat| ProcStat::from_procfs(&stat)),
        };
        let root_stat = match root_stat {
            Some(stat)
                if !stat.exited()
                    && self
                        .root_starttime
                        .is_none_or(|start| start == stat.starttime) =>
            {
                stat
            }
            _ => {
                self.lost_at_ns = Some(now_ns);
                self.previous.clear();
                sample.lost_at_ns = self.lost_at_ns;
                return sample;
            }
        };
        self.root_starttime = Some(root_stat.starttime);
        sample.alive = true;

        let members: Vec<(u32, ProcStat)> = match table {
            Some(table) => descendants(root, table)
                .into_iter()
                .filter_map(|pid| Some((pid, *table.get(&pid)?)))
                .collect(),
            None => vec![(root, root_stat)],
        };
        let with_reaped = self.target.include_descendants;
        let mut current = HashMap::with_capacity(members.len());
        let mut now = Totals {
            io_complete: true,
            ..Totals::default()
        };
        let (mut rss_pages, mut threads) = (0, 0);
        for (pid, stat) in &members {
            let io = match read_io(open, *pid) {
                Ok(io) => Some(IoCounters {
                    read_bytes: io.read_bytes,
                    write_bytes: io.write_bytes,
                    cancelled_write_bytes: io.cancelled_write_bytes,
                }),
                Err(ProcError::PermissionDenied(_)) => None,
                Err(_) if *pid != root => continue,
                Err(_) => None,
            };
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
        sample.processes = current.len() as u32;
        sample.rss_bytes = Some(rss_pages * page_size);
        sample.threads = Some(threads);

        if let (Some(elapsed_s), true) = (elapsed_s, self.has_previous) {
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
            let per_second = |ticks_now: u64, ticks_before: u64| {
                ticks_now.saturating_sub(ticks_before) as f64 / ticks_per_second / elapsed_s * 100.0
            };
            if elapsed_s > 0.0 {
                sample.cpu_user_pct = Some(per_second(now.user_ticks, before.user_ticks));
                sample.cpu_system_pct = Some(per_second(now.system_ticks, before.system_ticks));
            }
            if now.io_complete && before.io_complete {
                sample.disk_read_bytes = Some(now.read_bytes.saturating_sub(before.read_bytes));
                let written_now = now.write_bytes as i128 - now.cancelled_write_bytes as i128;
                let written_before =
                    before.write_bytes as i128 - before.cancelled_write_bytes as i128;
                sample.disk_written_bytes = Some((written_now - written_before).max(0) as u64);
            }
        }
        self.previous = current;
        self.has_previous = true;
        sample
    }
}

/// The aggregate `cpu` line, ticks (missing fields 0, as in brokerbench).
#[derive(Debug, Clone, Copy, Default)]
struct CpuTimes {
    user: u64,
    nice: u64,
    system: u64,
    idle: u64,
    iowait: u64,
    irq: u64,
    softirq: u64,
    steal: u64,
    guest: u64,
    guest_nice: u64,
}

fn cpu_shares(before: &CpuTimes, now: &CpuTimes) -> Option<HostCpu> {
    let d = |now: u64, before: u64| now.saturating_sub(before) as f64;
    let guest = d(now.guest, before.guest);
    let guest_nice = d(now.guest_nice, before.guest_nice);
    let user = (d(now.user, before.user) - guest).max(0.0);
    let nice = (d(now.nice, before.nice) - guest_nice).max(0.0);
    let system = d(now.system, before.system);
    let idle = d(now.idle, before.idle);
    let iowait = d(now.iowait, before.iowait);
    let irq = d(now.irq, before.irq) + d(now.softirq, before.softirq);
    let steal = d(now.steal, before.steal);
    let guest_all = guest + guest_nice;
    let total = user + nice + system + idle + iowait + irq + steal + guest_all;
    if total <= 0.0 {
        return None;
    }
    let pct = |ticks: f64| ticks / total * 100.0;
    Some(HostCpu {
        user_pct: pct(user),
        nice_pct: pct(nice),
        system_pct: pct(system),
        iowait_pct: pct(iowait),
        irq_pct: pct(irq),
        steal_pct: pct(steal),
        guest_pct: pct(guest_all),
        idle_pct: pct(idle),
    })
}

#[derive(Debug, Clone)]
struct DiskCounters {
    name: String,
    read_bytes: u64,
    written_bytes: u64,
}

#[derive(Debug, Clone)]
struct InterfaceCounters {
    name: String,
    rx_bytes: u64,
    rx_packets: u64,
    tx_bytes: u64,
    tx_packets: u64,
}

fn counter_delta(now: u64, before: Option<u64>) -> u64 {
    match before {
        Some(before) if now >= before => now - before,
        _ => now,
    }
}

fn is_whole_physical_disk(name: &str) -> bool {
    if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
        return false;
    }
    let dir = Path::new("/sys/block").join(name.replace('/', "!"));
    if !dir.is_dir() || dir.join("partition").exists() {
        return false;
    }
    match std::fs::read_dir(dir.join("slaves")) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => true,
    }
}

/// brokerbench's `HostState`, reading through procfs.
#[derive(Debug, Default)]
struct HostState {
    previous_cpu: Option<CpuTimes>,
    previous_disks: Option<HashMap<String, DiskCounters>>,
    previous_network: Option<HashMap<String, InterfaceCounters>>,
    counted_disks: HashMap<String, bool>,
}

impl HostState {
    fn sample(&mut self) -> HostSample {
        let mut sample = HostSample::default();

        let stat = KernelStats::current().ok().map(|stats| {
            let t = &stats.total;
            let times = CpuTimes {
                user: t.user,
                nice: t.nice,
                system: t.system,
                idle: t.idle,
                iowait: t.iowait.unwrap_or(0),
                irq: t.irq.unwrap_or(0),
                softirq: t.softirq.unwrap_or(0),
                steal: t.steal.unwrap_or(0),
                guest: t.guest.unwrap_or(0),
                guest_nice: t.guest_nice.unwrap_or(0),
            };
            (times, stats.cpu_time.len() as u32)
        });
        if let Some((times, cpu_count)) = stat {
            sample.cpu_count = cpu_count;
            if let Some(previous) = self.previous_cpu {
                sample.cpu = cpu_shares(&previous, &times);
            }
        }
        self.previous_cpu = stat.map(|(times, _)| times);

        if let Ok(load) = LoadAverage::current() {
            sample.load_1m = Some(f64::from(load.one));
        }
        if let Ok(meminfo) = Meminfo::current() {
            sample.memory_used_bytes = meminfo
                .mem_available
                .map(|available| meminfo.mem_total.saturating_sub(available));
            sample.page_cache_bytes = Some(meminfo.cached);
        }

        let disks = if Path::new("/sys/block").is_dir() {
            procfs::diskstats().ok()
        } else {
            None
        };
        let disks = disks.map(|disks| {
            disks
                .into_iter()
                .filter(|disk| {
                    *self
                        .counted_disks
                        .entry(disk.name.clone())
                        .or_insert_with(|| is_whole_physical_disk(&disk.name))
                })
                .map(|disk| {
                    let counters = DiskCounters {
                        name: disk.name.clone(),
                        read_bytes: disk.sectors_read * 512,
                        written_bytes: disk.sectors_written * 512,
                    };
                    (disk.name, counters)
                })
                .collect::<HashMap<_, _>>()
        });
        if let (Some(previous), Some(current)) = (&self.previous_disks, &disks) {
            let mut devices: Vec<DeviceIo> = current
                .values()
                .map(|now| {
                    let before = previous.get(&now.name);
                    DeviceIo {
                        name: now.name.clone(),
                        read_bytes: counter_delta(now.read_bytes, before.map(|b| b.read_bytes)),
                        written_bytes: counter_delta(
                            now.written_bytes,
                            before.map(|b| b.written_bytes),
                        ),
                    }
                })
                .collect();
            devices.sort_by(|a, b| a.name.cmp(&b.name));
            sample.disks = Some(devices);
        }
        self.previous_disks = disks;

        let network = procfs::net::dev_status().ok().map(|interfaces| {
            interfaces
                .into_iter()
                .map(|(name, status)| {
                    let counters = InterfaceCounters {
                        name: status.name,
                        rx_bytes: status.recv_bytes,
                        rx_packets: status.recv_packets,
                        tx_bytes: status.sent_bytes,
                        tx_packets: status.sent_packets,
                    };
                    (name, counters)
                })
                .collect::<HashMap<_, _>>()
        });
        if let (Some(previous), Some(current)) = (&self.previous_network, &network) {
            let mut interfaces: Vec<InterfaceIo> = current
                .values()
                .map(|now| {
                    let before = previous.get(&now.name);
                    InterfaceIo {
                        name: now.name.clone(),
                        rx_bytes: counter_delta(now.rx_bytes, before.map(|b| b.rx_bytes)),
                        rx_packets: counter_delta(now.rx_packets, before.map(|b| b.rx_packets)),
                        tx_bytes: counter_delta(now.tx_bytes, before.map(|b| b.tx_bytes)),
                        tx_packets: counter_delta(now.tx_packets, before.map(|b| b.tx_packets)),
                    }
                })
                .collect();
            interfaces.sort_by(|a, b| a.name.cmp(&b.name));
            sample.network = Some(interfaces);
        }
        self.previous_network = network;

        sample
    }
}

/// brokerbench's `Sampler`, reading through procfs.
#[derive(Debug)]
struct ProcfsSampler {
    open: Open,
    targets: Vec<TargetState>,
    host: HostState,
    table: ProcessTable,
    units: (f64, u64),
    previous_instant: Option<Instant>,
}

impl ProcfsSampler {
    fn new(targets: Vec<Target>, open: Open) -> ProcfsSampler {
        ProcfsSampler {
            open,
            targets: targets.into_iter().map(TargetState::new).collect(),
            host: HostState::default(),
            table: ProcessTable::default(),
            units: (procfs::ticks_per_second() as f64, procfs::page_size()),
            previous_instant: None,
        }
    }

    fn sample(&mut self, now_ns: u64) -> Sample {
        let instant = Instant::now();
        let interval_s = self
            .previous_instant
            .map(|previous| instant.duration_since(previous).as_secs_f64());
        self.previous_instant = Some(instant);

        let tree_roots: Vec<u32> = self
            .targets
            .iter()
            .filter(|t| t.target.include_descendants && t.lost_at_ns.is_none())
            .map(|t| t.target.root_pid)
            .collect();
        let table = if tree_roots.is_empty() {
            None
        } else {
            self.table.refresh(&tree_roots, self.open);
            Some(&self.table.stats)
        };
        let (units, open) = (self.units, self.open);
        let processes = self
            .targets
            .iter_mut()
            .map(|target| target.sample(now_ns, interval_s, table, units, open))
            .collect();
        let host = self.host.sample();
        Sample {
            time_ns: now_ns,
            interval_s,
            processes,
            host,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Comparing

/// The figures of a sample that two samplers taken a moment apart must agree on.
fn same_figures(a: &Sample, b: &Sample) -> Vec<String> {
    let mut differences = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            differences.push(format!("{what}: brokerbench {x}, procfs {y}"));
        }
    };
    for (p, q) in a.processes.iter().zip(&b.processes) {
        let role = p.role.as_str();
        differ(
            &format!("{role} alive"),
            p.alive.to_string(),
            q.alive.to_string(),
        );
        differ(
            &format!("{role} processes"),
            p.processes.to_string(),
            q.processes.to_string(),
        );
        differ(
            &format!("{role} threads"),
            format!("{:?}", p.threads),
            format!("{:?}", q.threads),
        );
        differ(
            &format!("{role} has CPU/IO values"),
            format!(
                "{:?}",
                (p.cpu_user_pct.is_some(), p.disk_read_bytes.is_some())
            ),
            format!(
                "{:?}",
                (q.cpu_user_pct.is_some(), q.disk_read_bytes.is_some())
            ),
        );
        // RSS moves a little between two samples of a live process; compare in MB.
        differ(
            &format!("{role} RSS MB"),
            format!("{:?}", p.rss_bytes.map(|b| b >> 20)),
            format!("{:?}", q.rss_bytes.map(|b| b >> 20)),
        );
    }
    let (h, k) = (&a.host, &b.host);
    differ(
        "cpu_count",
        h.cpu_count.to_string(),
        k.cpu_count.to_string(),
    );
    differ(
        "host has CPU shares",
        h.cpu.is_some().to_string(),
        k.cpu.is_some().to_string(),
    );
    differ(
        "load_1m (2 decimals)",
        format!("{:.2?}", h.load_1m),
        format!("{:.2?}", k.load_1m),
    );
    differ(
        "page cache MB",
        format!("{:?}", h.page_cache_bytes.map(|b| b >> 20)),
        format!("{:?}", k.page_cache_bytes.map(|b| b >> 20)),
    );
    differ(
        "memory used present",
        h.memory_used_bytes.is_some().to_string(),
        k.memory_used_bytes.is_some().to_string(),
    );
    let names = |s: &HostSample| {
        (
            s.disks
                .as_ref()
                .map(|d| d.iter().map(|d| d.name.clone()).collect::<Vec<_>>()),
            s.network
                .as_ref()
                .map(|n| n.iter().map(|n| n.name.clone()).collect::<Vec<_>>()),
        )
    };
    differ(
        "disks, interfaces",
        format!("{:?}", names(h)),
        format!("{:?}", names(k)),
    );
    differences
}

fn main() {
    let mut args = std::env::args().skip(1);
    let samples: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let broker_pid: Option<u32> = args.next().and_then(|a| a.parse().ok());

    // The broker: BROKER_PID, or a small tree of our own (sh + 2 sleeps, in its own process
    // group so it can be ended as a whole).
    let mut spawned = None;
    let broker_pid = broker_pid.unwrap_or_else(|| {
        let child = Command::new("sh")
            .args(["-c", "sleep 600 & sleep 600 & wait"])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawning sh");
        let pid = child.id();
        spawned = Some(child);
        std::thread::sleep(Duration::from_millis(200));
        pid
    });
    let targets = || vec![Target::broker(broker_pid), Target::client()];

    let mut own = Sampler::new(targets()).expect("one target per role");
    let mut by_process = ProcfsSampler::new(targets(), Open::Process);
    let mut by_path = ProcfsSampler::new(targets(), Open::Path);
    // Baselines, then one more each for the check that both read the same figures.
    own.sample(system_clock_ns());
    by_process.sample(system_clock_ns());
    by_path.sample(system_clock_ns());
    std::thread::sleep(Duration::from_millis(100));
    let reference = own.sample(system_clock_ns());
    let via_process = by_process.sample(system_clock_ns());
    let via_path = by_path.sample(system_clock_ns());

    let processes_on_host = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    let broker = reference.process(Role::Broker).expect("broker target");
    println!(
        "targets: broker pid {broker_pid} ({} processes, {:?} threads), client pid {} \
         (this process), host ({} processes on it, {} CPUs, disks {:?}, interfaces {:?})",
        broker.processes,
        broker.threads,
        std::process::id(),
        processes_on_host,
        reference.host.cpu_count,
        reference
            .host
            .disks
            .as_ref()
            .map(|d| d.iter().map(|d| d.name.as_str()).collect::<Vec<_>>()),
        reference
            .host
            .network
            .as_ref()
            .map(|n| n.iter().map(|n| n.name.as_str()).collect::<Vec<_>>()),
    );
    for (name, other) in [
        ("procfs-process", &via_process),
        ("procfs-parsers", &via_path),
    ] {
        let differences = same_figures(&reference, other);
        if differences.is_empty() {
            println!("same figures: brokerbench and {name} agree");
        } else {
            println!("same figures: brokerbench and {name} DIFFER: {differences:?}");
        }
    }

    const VARIANTS: [&str; 3] = ["brokerbench", "procfs-process", "procfs-parsers"];
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); VARIANTS.len()];
    let mut walls = Vec::with_capacity(samples);
    println!(
        "{samples} samples per variant per round, {rounds} rounds; per sample: wall mean / \
         median µs, CPU µs (user + sys), allocations (bytes)"
    );
    for round in 0..rounds {
        for k in 0..VARIANTS.len() {
            let variant = (round + k) % VARIANTS.len();
            let result = match variant {
                0 => measure(samples, &mut walls, || own.sample(system_clock_ns())),
                1 => measure(samples, &mut walls, || by_process.sample(system_clock_ns())),
                _ => measure(samples, &mut walls, || by_path.sample(system_clock_ns())),
            };
            println!(
                "round {} {:<15} wall {:7.1} / {:7.1}  CPU {:7.1} ({:5.1} + {:5.1})  \
                 allocs {:6.1} ({:7.0} B)",
                round + 1,
                VARIANTS[variant],
                result.wall_mean_us,
                result.wall_median_us,
                result.cpu_us,
                result.user_us,
                result.system_us,
                result.allocations,
                result.allocated_bytes,
            );
            results[variant].push(result);
        }
    }

    let med = |variant: usize, field: RoundField| {
        let mut values: Vec<f64> = results[variant].iter().map(field).collect();
        median(&mut values)
    };
    let fields: [(&str, RoundField); 7] = [
        ("wall mean µs", |r| r.wall_mean_us),
        ("wall median µs", |r| r.wall_median_us),
        ("CPU µs", |r| r.cpu_us),
        ("  user µs", |r| r.user_us),
        ("  system µs", |r| r.system_us),
        ("allocations", |r| r.allocations),
        ("allocated bytes", |r| r.allocated_bytes),
    ];
    println!(
        "medians over {rounds} rounds, per sample  {:>12} {:>15} {:>15}   ratios procfs-process, \
         procfs-parsers : brokerbench",
        VARIANTS[0], VARIANTS[1], VARIANTS[2]
    );
    for (name, field) in fields {
        let (a, b, c) = (med(0, field), med(1, field), med(2, field));
        println!(
            "  {name:<37} {a:>12.1} {b:>15.1} {c:>15.1}   {:.2}x, {:.2}x",
            b / a,
            c / a
        );
    }
    let spread = |variant: usize| {
        let cpu: Vec<f64> = results[variant].iter().map(|r| r.cpu_us).collect();
        let (min, max) = cpu
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        format!("{min:.1}..{max:.1}")
    };
    println!(
        "CPU µs per sample, min..max over rounds: brokerbench {}, procfs-process {}, \
         procfs-parsers {}",
        spread(0),
        spread(1),
        spread(2)
    );

    if let Some(mut child) = spawned {
        // SAFETY: kill with the process group id of the group this example started.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        let _ = child.wait();
    }
}
