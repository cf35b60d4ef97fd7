//! What the resource monitor costs: takes 60 samples of a broker-like target (pid 1 and all
//! its descendants, i.e. every process: the worst case of the process-tree scan), this
//! process as the client, and the host, and prints the CPU time used per sample.
//!
//! `cargo run --release -p brokerbench-monitor --example sampler_cost [PAUSE_MS] [ROOT_PID]`
//! (PAUSE_MS between samples, default 50; ROOT_PID default 1).

use std::time::{Duration, Instant};

use brokerbench_monitor::{system_clock_ns, Sampler, Target};

/// CPU time of this process so far, user + system, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain data that getrusage fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let pause_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let root_pid: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    const SAMPLES: u32 = 60;

    let mut sampler = Sampler::new(vec![Target::broker(root_pid), Target::client()])
        .expect("one target per role");
    sampler.sample(system_clock_ns());
    let mut processes = 0;
    let mut sampling_cpu_s = 0.0;
    let mut sampling_wall_s = 0.0;
    for _ in 0..SAMPLES {
        std::thread::sleep(Duration::from_millis(pause_ms));
        let (cpu_before, wall_before) = (cpu_seconds(), Instant::now());
        let sample = sampler.sample(system_clock_ns());
        sampling_wall_s += wall_before.elapsed().as_secs_f64();
        sampling_cpu_s += cpu_seconds() - cpu_before;
        processes = sample.processes[0].processes;
    }
    let per_sample_ms = sampling_cpu_s / f64::from(SAMPLES) * 1e3;
    println!(
        "{SAMPLES} samples of a {processes}-process tree + client + host: \
         {per_sample_ms:.2} ms CPU per sample ({:.2} ms wall), \
         {:.2}% of one core at 1 sample/s",
        sampling_wall_s / f64::from(SAMPLES) * 1e3,
        per_sample_ms / 10.0,
    );
}
