//! Is brokerbench's own `/proc` parsing cheaper per sample than the `procfs` crate?
//!
//! Takes SAMPLES back-to-back samples of the same targets — this process as the client, a
//! broker-like process tree (a spawned `sh` with two `sleep` children, or BROKER_PID and all
//! its descendants), and the host — once with brokerbench's [`Sampler`] (the call the
//! monitor thread makes each tick) reading `/proc` with its own parsers, and with the same
//! `Sampler` given a [`ProcSource`] that reads through the `procfs` crate, in two ways:
//!
//! - `procfs-process`: the crate's process API, `Process::new(pid)?.stat()` / `.io()` (one
//!   extra `openat(O_PATH)` of `/proc/PID` per process read);
//! - `procfs-parsers`: only the crate's parsers on the same paths, `Stat::from_file`,
//!   `Io::from_file` (the same open/read/close as brokerbench).
//!
//! Host side, both: `KernelStats`, `LoadAverage`, `Meminfo`, `diskstats()`,
//! `net::dev_status()`. Everything else is brokerbench's sampler itself: its process-table
//! cache (stats re-read only for new, changed or member pids; all every 60 refreshes), tree
//! walk and deltas, so the difference is the reading and parsing. The variants alternate in ROUNDS rounds (order
//! rotated each round); each round reports per sample the mean and median wall time, the
//! thread CPU time (`CLOCK_THREAD_CPUTIME_ID`; user/system split from `getrusage`), and the
//! heap allocations (a counting global allocator). Medians over the rounds and the ratios to
//! brokerbench close the output, after a check that both read the same figures.
//!
//! `cargo run --release -p brokerbench-monitor --example procfs_cost [SAMPLES] [ROUNDS] [BROKER_PID]`
//! (defaults 2000, 5, a spawned tree).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use brokerbench_monitor::{
    system_clock_ns, CpuTimes, DiskCounters, HostSample, InterfaceCounters, ProcIo, ProcSource,
    ProcStat, ProcessSample, Role, Sample, Sampler, Target,
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
// ---------------------------------------------------------------------------------------
// The sampler's readings through the procfs crate

/// How the procfs side opens a process's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// `Process::new(pid)?.stat()` / `.io()`: the crate's process API.
    Process,
    /// `Stat::from_file("/proc/PID/stat")` / `Io::from_file(..)`: only the crate's parsers.
    Path,
}

/// brokerbench's readings, taken with the procfs crate; plugged into brokerbench's own
/// [`Sampler`], so the algorithm around them is the one that runs.
#[derive(Debug)]
struct Procfs(Open);

/// The kind of a procfs error as the sampler tells them apart.
fn io_error(error: ProcError) -> std::io::Error {
    let kind = match error {
        ProcError::PermissionDenied(_) => std::io::ErrorKind::PermissionDenied,
        ProcError::NotFound(_) => std::io::ErrorKind::NotFound,
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, error.to_string())
}

impl ProcSource for Procfs {
    fn stat(&mut self, pid: u32) -> Option<ProcStat> {
        let stat = match self.0 {
            Open::Process => Process::new(pid as i32).and_then(|p| p.stat()),
            Open::Path => Stat::from_file(format!("/proc/{pid}/stat")),
        }
        .ok()?;
        Some(ProcStat {
            state: stat.state as u8,
            ppid: stat.ppid as u32,
            utime: stat.utime,
            stime: stat.stime,
            cutime: stat.cutime.max(0) as u64,
            cstime: stat.cstime.max(0) as u64,
            num_threads: stat.num_threads.max(0) as u64,
            starttime: stat.starttime,
            rss_pages: stat.rss,
        })
    }

    fn io(&mut self, pid: u32) -> std::io::Result<Option<ProcIo>> {
        let io: Io = match self.0 {
            Open::Process => Process::new(pid as i32).and_then(|p| p.io()),
            Open::Path => Io::from_file(format!("/proc/{pid}/io")),
        }
        .map_err(io_error)?;
        Ok(Some(ProcIo {
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            cancelled_write_bytes: io.cancelled_write_bytes,
        }))
    }

    fn cpu(&mut self) -> Option<(CpuTimes, u32)> {
        let stats = KernelStats::current().ok()?;
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
        Some((times, stats.cpu_time.len() as u32))
    }

    fn load_1m(&mut self) -> Option<f64> {
        LoadAverage::current().ok().map(|load| f64::from(load.one))
    }

    fn memory(&mut self) -> (Option<u64>, Option<u64>) {
        match Meminfo::current() {
            Ok(meminfo) => (
                meminfo
                    .mem_available
                    .map(|available| meminfo.mem_total.saturating_sub(available)),
                Some(meminfo.cached),
            ),
            Err(_) => (None, None),
        }
    }

    fn disks(&mut self) -> Option<Vec<DiskCounters>> {
        let disks = procfs::diskstats().ok()?;
        Some(
            disks
                .into_iter()
                .map(|disk| DiskCounters {
                    name: disk.name,
                    read_bytes: disk.sectors_read * 512,
                    written_bytes: disk.sectors_written * 512,
                })
                .collect(),
        )
    }

    fn interfaces(&mut self) -> Option<Vec<InterfaceCounters>> {
        let interfaces = procfs::net::dev_status().ok()?;
        Some(
            interfaces
                .into_values()
                .map(|status| InterfaceCounters {
                    name: status.name,
                    rx_bytes: status.recv_bytes,
                    rx_packets: status.recv_packets,
                    tx_bytes: status.sent_bytes,
                    tx_packets: status.sent_packets,
                })
                .collect(),
        )
    }
}

// ---------------------------------------------------------------------------------------
// Comparing

/// The figures of a sample that two samplers taken a moment apart must agree on.
fn same_figures(a: &Sample, b: &Sample) -> Vec<String> {
    let mut differences = Vec::new();
    for (p, q) in a.processes.iter().zip(&b.processes) {
        differences.extend(process_differences(p, q));
    }
    differences.extend(host_differences(&a.host, &b.host));
    differences
}

/// Notes a figure that brokerbench and procfs read differently.
fn note_difference(differences: &mut Vec<String>, what: &str, x: String, y: String) {
    if x != y {
        differences.push(format!("{what}: brokerbench {x}, procfs {y}"));
    }
}

/// The figures of one target that brokerbench (`p`) and procfs (`q`) read differently.
fn process_differences(p: &ProcessSample, q: &ProcessSample) -> Vec<String> {
    let mut differences = Vec::new();
    let mut differ =
        |what: &str, x: String, y: String| note_difference(&mut differences, what, x, y);
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
    differences
}

/// The figures of the host that brokerbench (`h`) and procfs (`k`) read differently.
fn host_differences(h: &HostSample, k: &HostSample) -> Vec<String> {
    let mut differences = Vec::new();
    let mut differ =
        |what: &str, x: String, y: String| note_difference(&mut differences, what, x, y);
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

// ---------------------------------------------------------------------------------------
// Running

/// The variants, in the order their rounds are kept.
const VARIANTS: [&str; 3] = ["brokerbench", "procfs-process", "procfs-parsers"];

/// One sampler per variant, all of the same targets.
struct Samplers {
    own: Sampler,
    by_process: Sampler<Procfs>,
    by_path: Sampler<Procfs>,
}

impl Samplers {
    /// Samplers of the broker tree at `broker_pid` and of this process, one per variant.
    fn new(broker_pid: u32) -> Samplers {
        let targets = || vec![Target::broker(broker_pid), Target::client()];
        let own = Sampler::new(targets()).expect("one target per role");
        let by_process =
            Sampler::with_source(targets(), Procfs(Open::Process)).expect("one target per role");
        let by_path =
            Sampler::with_source(targets(), Procfs(Open::Path)).expect("one target per role");
        Samplers {
            own,
            by_process,
            by_path,
        }
    }

    /// Takes each variant's baseline, then one more sample each: brokerbench's, then
    /// procfs-process's, then procfs-parsers'.
    fn check_samples(&mut self) -> [Sample; 3] {
        // Baselines, then one more each for the check that both read the same figures.
        self.own.sample(system_clock_ns());
        self.by_process.sample(system_clock_ns());
        self.by_path.sample(system_clock_ns());
        std::thread::sleep(Duration::from_millis(100));
        let reference = self.own.sample(system_clock_ns());
        let via_process = self.by_process.sample(system_clock_ns());
        let via_path = self.by_path.sample(system_clock_ns());
        [reference, via_process, via_path]
    }
}

/// Starts a small broker-like tree of our own: `sh` with two `sleep` children, in its own
/// process group so it can be ended as a whole.
fn spawn_broker_tree() -> Child {
    let child = Command::new("sh")
        .args(["-c", "sleep 600 & sleep 600 & wait"])
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawning sh");
    std::thread::sleep(Duration::from_millis(200));
    child
}

/// Ends the broker tree this example started, if it started one.
fn end_broker_tree(spawned: Option<Child>) {
    if let Some(mut child) = spawned {
        // SAFETY: kill with the process group id of the group this example started.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        let _ = child.wait();
    }
}

/// Prints what is sampled: the broker tree, this process and the host.
fn print_targets(broker_pid: u32, reference: &Sample) {
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
}

/// Prints whether each procfs variant read the same figures as brokerbench.
fn print_agreement(reference: &Sample, via_process: &Sample, via_path: &Sample) {
    for (name, other) in [
        ("procfs-process", via_process),
        ("procfs-parsers", via_path),
    ] {
        let differences = same_figures(reference, other);
        if differences.is_empty() {
            println!("same figures: brokerbench and {name} agree");
        } else {
            println!("same figures: brokerbench and {name} DIFFER: {differences:?}");
        }
    }
}

/// Measures `samples` samples of every variant in each of `rounds` rounds, the order of the
/// variants rotated each round, and prints each; returns each variant's rounds, in the order
/// of [`VARIANTS`].
fn run_rounds(samples: usize, rounds: usize, samplers: &mut Samplers) -> Vec<Vec<Round>> {
    let Samplers {
        own,
        by_process,
        by_path,
    } = samplers;
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
    results
}

/// Prints each figure's median over the rounds for every variant, and the ratios of the
/// procfs variants to brokerbench.
fn print_medians(rounds: usize, results: &[Vec<Round>]) {
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
}

/// Prints the smallest and largest CPU time per sample over the rounds, for every variant.
fn print_cpu_spread(results: &[Vec<Round>]) {
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
}

fn main() {
    let mut args = std::env::args().skip(1);
    let samples: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let broker_pid: Option<u32> = args.next().and_then(|a| a.parse().ok());

    // The broker: BROKER_PID, or a small tree of our own (sh + 2 sleeps, in its own process
    // group so it can be ended as a whole).
    let (broker_pid, spawned) = match broker_pid {
        Some(pid) => (pid, None),
        None => {
            let child = spawn_broker_tree();
            (child.id(), Some(child))
        }
    };

    let mut samplers = Samplers::new(broker_pid);
    let [reference, via_process, via_path] = samplers.check_samples();

    print_targets(broker_pid, &reference);
    print_agreement(&reference, &via_process, &via_path);

    let results = run_rounds(samples, rounds, &mut samplers);

    print_medians(rounds, &results);
    print_cpu_spread(&results);

    end_broker_tree(spawned);
}
