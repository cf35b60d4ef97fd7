//! Sampling on a timer in a background thread, and the summary over a measurement window.

use std::ops::Range;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brokerbench_model::resources::{HostResources, ProcessResources, ResourceSummary};

use crate::process::{Role, Target};
use crate::sampler::{Sample, Sampler};
use crate::MonitorError;

/// A background thread that samples the targets and the host every interval.
///
/// The first sample is taken at once and only sets the baseline (no interval values). Ticks
/// follow `start + k × interval`; a tick missed because sampling was slow is skipped, not
/// made up. `stop` takes a last sample when at least a tenth of an interval passed since
/// the previous one, so the end of the run is covered.
#[derive(Debug)]
pub struct Monitor {
    stop: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
    samples: Arc<Mutex<Vec<Sample>>>,
    interval: Duration,
}

impl Monitor {
    /// Starts sampling `targets` and the host every `interval`. `clock` gives the timestamp
    /// of each sample in ns since the UNIX epoch (pass the run's clock so samples line up
    /// with the run's timeline, or [`crate::system_clock_ns`]). `on_sample` runs on the
    /// monitor thread after each sample (to append a resources.csv row, for example); keep
    /// it short, it delays the next sample.
    pub fn start<C, F>(
        targets: Vec<Target>,
        interval: Duration,
        clock: C,
        mut on_sample: F,
    ) -> Result<Monitor, MonitorError>
    where
        C: Fn() -> u64 + Send + 'static,
        F: FnMut(&Sample) + Send + 'static,
    {
        if interval.is_zero() {
            return Err(MonitorError::ZeroInterval);
        }
        let mut sampler = Sampler::new(targets)?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop, stop_requested) = mpsc::channel::<()>();
        let shared = Arc::clone(&samples);
        let thread = std::thread::Builder::new()
            .name("resource-monitor".to_string())
            .spawn(move || {
                let mut record = |sample: Sample| {
                    on_sample(&sample);
                    shared
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(sample);
                };
                let mut next_tick = Instant::now();
                loop {
                    let taken_at = Instant::now();
                    record(sampler.sample(clock()));
                    let now = Instant::now();
                    while next_tick <= now {
                        next_tick += interval;
                    }
                    match stop_requested.recv_timeout(next_tick - now) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                            if taken_at.elapsed() >= interval / 10 {
                                record(sampler.sample(clock()));
                            }
                            return;
                        }
                    }
                }
            })
            .map_err(MonitorError::Spawn)?;
        Ok(Monitor {
            stop,
            thread: Some(thread),
            samples,
            interval,
        })
    }

    /// Stops sampling (after a last sample, see the type docs) and returns every sample
    /// taken. If `on_sample` panicked, the samples taken until then are returned.
    pub fn stop(mut self) -> Recording {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let samples =
            std::mem::take(&mut *self.samples.lock().unwrap_or_else(PoisonError::into_inner));
        Recording {
            interval: self.interval,
            samples,
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The samples of a finished monitor.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Configured sampling interval.
    pub interval: Duration,
    /// Every sample, oldest first; the first one is the baseline without interval values.
    pub samples: Vec<Sample>,
}

impl Recording {
    /// Summary over the window `from_ns..to_ns` (ns since the UNIX epoch); see [`summarize`].
    pub fn summarize(&self, window: Range<u64>) -> ResourceSummary {
        summarize(&self.samples, self.interval, window)
    }

    /// [`Recording::summarize`], with the times in its notes in seconds since `origin_ns`
    /// (the start of the run) rather than since the first sample.
    pub fn summarize_since(&self, window: Range<u64>, origin_ns: u64) -> ResourceSummary {
        summarize_with(&self.samples, self.interval, window, Some(origin_ns))
    }
}

/// Aggregates samples over a measurement window `from_ns..to_ns` (ns since the UNIX epoch;
/// `0..u64::MAX` for everything). A sample's interval counts when its midpoint lies in the
/// window, so with 1-second sampling the aggregation covers the window to within half a
/// second at each end; warm-up and drain samples are left out. Means are time-weighted;
/// byte counts are totals over the counted intervals; maxima and instant values (RSS,
/// threads, memory, load) come from the counted samples. Whether a process was lost is
/// taken from all samples, in or out of the window, and reported in `notes`.
pub fn summarize(samples: &[Sample], interval: Duration, window: Range<u64>) -> ResourceSummary {
    summarize_with(samples, interval, window, None)
}

fn summarize_with(
    samples: &[Sample],
    interval: Duration,
    window: Range<u64>,
    origin_ns: Option<u64>,
) -> ResourceSummary {
    let origin_ns = origin_ns
        .or_else(|| samples.first().map(|s| s.time_ns))
        .unwrap_or(0);
    let counted: Vec<(&Sample, f64)> = samples
        .iter()
        .filter_map(|sample| {
            let interval_s = sample.interval_s?;
            let midpoint = sample.time_ns as f64 - interval_s * 1e9 / 2.0;
            (midpoint >= window.start as f64 && midpoint < window.end as f64)
                .then_some((sample, interval_s))
        })
        .collect();
    let mut notes = Vec::new();
    if counted.is_empty() {
        notes.push("no resource sample interval falls in the measurement window".to_string());
    }
    let broker = summarize_process(Role::Broker, samples, &counted, origin_ns, &mut notes);
    let client = summarize_process(Role::Client, samples, &counted, origin_ns, &mut notes);
    let host = summarize_host(samples, &counted, &mut notes);
    ResourceSummary {
        samples: counted.len() as u64,
        interval_s: interval.as_secs_f64(),
        window_s: counted.iter().map(|(_, dt)| dt).sum(),
        broker,
        client,
        host,
        notes,
    }
}

/// A time-weighted mean and a maximum of per-interval values.
#[derive(Debug, Default)]
struct Weighted {
    sum: f64,
    seconds: f64,
    max: Option<f64>,
}

impl Weighted {
    fn add(&mut self, value: Option<f64>, seconds: f64) {
        if let Some(value) = value {
            self.sum += value * seconds;
            self.seconds += seconds;
            self.max = Some(self.max.map_or(value, |m: f64| m.max(value)));
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.sum / self.seconds)
    }
}

fn summed(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.fold(None, |total, value| match value {
        Some(v) => Some(total.unwrap_or(0) + v),
        None => total,
    })
}

fn max_of(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.flatten().max()
}

fn megabytes(bytes: Option<u64>) -> Option<f64> {
    bytes.map(|b| b as f64 / 1e6)
}

fn summarize_process(
    role: Role,
    all: &[Sample],
    counted: &[(&Sample, f64)],
    origin_ns: u64,
    notes: &mut Vec<String>,
) -> Option<ProcessResources> {
    let first = all.iter().find_map(|s| s.process(role))?;
    let name = role.as_str();
    let pid = first.root_pid;
    let lost_at_ns = all.iter().rev().find_map(|s| s.process(role)?.lost_at_ns);
    if !all.iter().any(|s| s.process(role).is_some_and(|p| p.alive)) {
        notes.push(format!(
            "{name} process {pid} was not running when monitoring started; no {name} values"
        ));
    } else {
        notes.extend(loss_notes(role, all, pid, origin_ns));
    }
    let in_window: Vec<_> = counted
        .iter()
        .filter_map(|(s, dt)| Some((s.process(role)?, *dt)))
        .collect();
    let (mut user, mut system) = (Weighted::default(), Weighted::default());
    for (p, dt) in &in_window {
        user.add(p.cpu_user_pct, *dt);
        system.add(p.cpu_system_pct, *dt);
    }
    let io_unknown = in_window
        .iter()
        .filter(|(p, _)| p.alive && p.cpu_user_pct.is_some() && p.disk_written_bytes.is_none())
        .count();
    if io_unknown > 0 {
        notes.push(format!(
            "{name} disk I/O unknown in {io_unknown} of {} intervals: /proc/{pid}/io not \
             readable (another user's process needs CAP_SYS_PTRACE); disk MB count the rest",
            in_window.len()
        ));
    }
    Some(ProcessResources {
        root_pid: pid,
        cpu_user_pct_mean: user.mean(),
        cpu_user_pct_max: user.max,
        cpu_system_pct_mean: system.mean(),
        cpu_system_pct_max: system.max,
        cpu_s: (user.seconds > 0.0).then(|| (user.sum + system.sum) / 100.0),
        rss_bytes_max: max_of(in_window.iter().map(|(p, _)| p.rss_bytes)),
        disk_written_mb: megabytes(summed(in_window.iter().map(|(p, _)| p.disk_written_bytes))),
        disk_read_mb: megabytes(summed(in_window.iter().map(|(p, _)| p.disk_read_bytes))),
        threads_max: max_of(in_window.iter().map(|(p, _)| p.threads)),
        lost_at_ns,
    })
}

/// Each time the process of `role` (first seen as `pid`) was lost, and the restart that
/// followed it if the process was found again, with times in seconds since `origin_ns`.
fn loss_notes(role: Role, all: &[Sample], pid: u32, origin_ns: u64) -> Vec<String> {
    let name = role.as_str();
    let at = |ns: u64| format!("{:.1} s", ns.saturating_sub(origin_ns) as f64 / 1e9);
    let mut notes = Vec::new();
    // Each loss, and the restart that followed it if the process was found again.
    let mut lost: Option<(u32, u64)> = None;
    let mut alive_pid = pid;
    for sample in all {
        let Some(p) = sample.process(role) else {
            continue;
        };
        match (p.alive, lost) {
            (false, None) => {
                lost = Some((alive_pid, p.lost_at_ns.unwrap_or(sample.time_ns)));
            }
            (true, Some((old, gone_ns))) => {
                notes.push(format!(
                    "{name} process {old} stopped running: first found gone {} into the run; followed as pid {} from {} ({name} values missing in between)",
                    at(gone_ns),
                    p.root_pid,
                    at(sample.time_ns)
                ));
                lost = None;
                alive_pid = p.root_pid;
            }
            (true, None) => alive_pid = p.root_pid,
            (false, Some(_)) => {}
        }
    }
    if let Some((old, gone_ns)) = lost {
        notes.push(format!(
            "{name} process {old} stopped running: first found gone {} into the run; no {name} values after that",
            at(gone_ns)
        ));
    }
    notes
}

fn summarize_host(
    all: &[Sample],
    counted: &[(&Sample, f64)],
    notes: &mut Vec<String>,
) -> HostResources {
    let mut shares: [Weighted; 8] = Default::default();
    for (s, dt) in counted {
        let cpu = s.host.cpu;
        let fields = [
            cpu.map(|c| c.user_pct),
            cpu.map(|c| c.nice_pct),
            cpu.map(|c| c.system_pct),
            cpu.map(|c| c.iowait_pct),
            cpu.map(|c| c.irq_pct),
            cpu.map(|c| c.steal_pct),
            cpu.map(|c| c.guest_pct),
            cpu.map(|c| c.idle_pct),
        ];
        for (share, value) in shares.iter_mut().zip(fields) {
            share.add(value, *dt);
        }
    }
    let hosts = || counted.iter().map(|(s, _)| &s.host);
    let disk_written = summed(hosts().map(|h| h.disk_written_bytes()));
    if !counted.is_empty() && disk_written.is_none() {
        notes.push("host disk I/O unknown: /sys/block or /proc/diskstats not readable".to_string());
    }
    let network = || hosts().map(|h| h.network_total());
    let loopback = || hosts().map(|h| h.loopback().cloned());
    HostResources {
        cpu_count: all.iter().map(|s| s.host.cpu_count).max().unwrap_or(0),
        cpu_user_pct_mean: shares[0].mean(),
        cpu_nice_pct_mean: shares[1].mean(),
        cpu_system_pct_mean: shares[2].mean(),
        cpu_iowait_pct_mean: shares[3].mean(),
        cpu_irq_pct_mean: shares[4].mean(),
        cpu_steal_pct_mean: shares[5].mean(),
        cpu_guest_pct_mean: shares[6].mean(),
        cpu_idle_pct_mean: shares[7].mean(),
        load_1m_max: hosts().filter_map(|h| h.load_1m).reduce(f64::max),
        memory_used_bytes_max: max_of(hosts().map(|h| h.memory_used_bytes)),
        page_cache_bytes_max: max_of(hosts().map(|h| h.page_cache_bytes)),
        disk_written_mb: megabytes(disk_written),
        disk_read_mb: megabytes(summed(hosts().map(|h| h.disk_read_bytes()))),
        net_rx_mb: megabytes(summed(network().map(|n| n.map(|n| n.rx_bytes)))),
        net_tx_mb: megabytes(summed(network().map(|n| n.map(|n| n.tx_bytes)))),
        loopback_packets: summed(loopback().map(|l| l.map(|l| l.rx_packets))),
        loopback_mb: megabytes(summed(loopback().map(|l| l.map(|l| l.rx_bytes)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{DeviceIo, HostCpu, HostSample};
    use crate::process::ProcessSample;

    fn broker(alive: bool, user: Option<f64>, written: Option<u64>) -> ProcessSample {
        ProcessSample {
            role: Role::Broker,
            root_pid: 7,
            node: None,
            alive,
            lost_at_ns: (!alive).then_some(9_000),
            processes: 1,
            cpu_user_pct: user,
            cpu_system_pct: user.map(|u| u / 2.0),
            rss_bytes: Some(100),
            disk_read_bytes: written.map(|_| 0),
            disk_written_bytes: written,
            threads: Some(3),
        }
    }

    fn sample(time_ns: u64, interval_s: Option<f64>, process: ProcessSample) -> Sample {
        Sample {
            time_ns,
            interval_s,
            processes: vec![process],
            nodes: Vec::new(),
            host: HostSample {
                cpu_count: 2,
                cpu: interval_s.map(|_| HostCpu {
                    user_pct: 30.0,
                    idle_pct: 70.0,
                    ..HostCpu::default()
                }),
                disks: interval_s.map(|_| {
                    vec![DeviceIo {
                        name: "vda".into(),
                        read_bytes: 0,
                        written_bytes: 2_000_000,
                    }]
                }),
                network: interval_s.map(|_| Vec::new()),
                ..HostSample::default()
            },
        }
    }

    #[test]
    fn window_keeps_intervals_whose_midpoint_is_inside_and_weights_by_time() {
        let s = 1_000_000_000;
        let samples = vec![
            sample(0, None, broker(true, None, None)),
            sample(s, Some(1.0), broker(true, Some(500.0), Some(9_000_000))), // warm-up
            sample(2 * s, Some(1.0), broker(true, Some(100.0), Some(1_000_000))),
            sample(5 * s, Some(3.0), broker(true, Some(20.0), Some(2_000_000))),
            sample(6 * s, Some(1.0), broker(true, Some(700.0), Some(5_000_000))), // drain
        ];
        let summary = summarize(&samples, Duration::from_secs(1), s..5 * s);
        assert_eq!(summary.samples, 2);
        assert_eq!(summary.window_s, 4.0);
        let b = summary.broker.unwrap();
        assert_eq!(b.cpu_user_pct_mean, Some((100.0 + 3.0 * 20.0) / 4.0));
        assert_eq!(b.cpu_user_pct_max, Some(100.0));
        assert_eq!(b.cpu_s, Some((100.0 + 60.0 + 50.0 + 30.0) / 100.0));
        assert_eq!(b.disk_written_mb, Some(3.0));
        assert_eq!(b.lost_at_ns, None);
        assert!(summary.client.is_none());
        assert_eq!(summary.host.cpu_user_pct_mean, Some(30.0));
        assert_eq!(summary.host.disk_written_mb, Some(4.0));
        assert_eq!(summary.host.loopback_packets, None, "no lo interface");
        assert_eq!(summary.host.net_rx_mb, Some(0.0));
        assert!(summary.notes.is_empty(), "{:?}", summary.notes);
    }

    #[test]
    fn lost_process_and_unreadable_io_are_noted() {
        let samples = vec![
            sample(0, None, broker(true, None, None)),
            sample(1_000, Some(1e-6), broker(true, Some(10.0), None)),
            sample(2_000, Some(1e-6), broker(false, None, None)),
        ];
        let summary = summarize(&samples, Duration::from_secs(1), 0..u64::MAX);
        let b = summary.broker.unwrap();
        assert_eq!(b.lost_at_ns, Some(9_000));
        assert_eq!(b.disk_written_mb, None);
        assert_eq!(summary.notes.len(), 2, "{:?}", summary.notes);
        assert!(summary.notes[0].contains("stopped running"));
        assert!(summary.notes[1].contains("disk I/O unknown in 1 of 2"));
    }

    #[test]
    fn a_restarted_process_is_followed_and_the_gap_noted_in_seconds_into_the_run() {
        let s = 1_000_000_000;
        let mut again = broker(true, Some(50.0), Some(0));
        again.root_pid = 8;
        let mut gone = broker(false, None, None);
        gone.lost_at_ns = Some(3 * s);
        let samples = vec![
            sample(0, None, broker(true, None, None)),
            sample(2 * s, Some(1.0), broker(true, Some(10.0), Some(0))),
            sample(3 * s, Some(1.0), gone),
            sample(6 * s, Some(1.0), again),
        ];
        let r = Recording {
            interval: Duration::from_secs(1),
            samples,
        };
        let summary = r.summarize_since(0..u64::MAX, s);
        assert_eq!(
            summary.notes,
            ["broker process 7 stopped running: first found gone 2.0 s into the run; followed as pid 8 from 5.0 s (broker values missing in between)"]
        );
    }
}
