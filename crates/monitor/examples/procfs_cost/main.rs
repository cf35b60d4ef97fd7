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

mod compare;
mod measure;
mod procfs_source;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use brokerbench_monitor::{system_clock_ns, Role, Sample, Sampler, Target};

use self::compare::same_figures;
use self::measure::{measure, median, Round, RoundField};
use self::procfs_source::{Open, Procfs};

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
