//! Host-wide sampling: CPU shares (mpstat's, with the busy time its ticks missed), load,
//! memory, disk and network traffic.
//!
//! CPU: deltas of the aggregate `cpu` line of `/proc/stat` between two samples, as shares of
//! all CPUs' time between the two readings. The kernel counts guest time inside user (and
//! guest_nice inside nice), so user and nice are reported with guest time taken out and guest
//! time is its own share; the shares add up to 100.
//!
//! The busy fields (user, nice, system, irq, softirq, guest) are tick samples: a CPU busy only
//! between two ticks (a thread woken by a timer that ends on a tick) adds nothing to them. On
//! a tickless kernel idle and iowait are not samples but the idle periods' exact lengths, so
//! the fields add up to less than the CPUs' time by the busy time the ticks missed. Measured
//! on this 2-core machine, `/proc/stat` read each second beside the quickstart (Kafka at
//! 50,000 msg/s): the fields added up to 185–197 of each measured second's 200 ticks, 0.03 to
//! 0.15 of a core missed. That time is busy time: it is split over the busy shares in their
//! ticks' proportion (all of it user when no busy tick fell), so the host is never less busy
//! than the processes on it, whose run times the kernel keeps exactly. mpstat divides by the
//! fields' sum instead, which shows such a host less busy than its processes.
//!
//! Disks: whole physical devices only, so nothing is counted twice. A device of
//! `/proc/diskstats` counts when `/sys/block/NAME` exists (partitions live below their disk,
//! not in `/sys/block`) without a `partition` file, its name does not start with `loop`,
//! `ram` or `zram` (memory-backed), and its `slaves/` directory is empty (device-mapper and
//! md devices pass their I/O to member disks, which are counted). Without `/sys/block` the
//! disk values are unknown.
//!
//! Network: every interface of `/proc/net/dev` in this process's network namespace,
//! including `lo`, so a local broker's client traffic shows up. Traffic that crosses
//! several virtual interfaces (veth + bridge) counts once per interface.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use crate::procfs::{clock_ticks_per_second, CpuTimes, DiskCounters, InterfaceCounters};
use crate::source::ProcSource;

/// Host CPU shares over one interval, percent of all CPUs (they add up to 100).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostCpu {
    /// User mode excluding niced and guest time (mpstat %usr), percent.
    pub user_pct: f64,
    /// Niced user mode excluding guest_nice (mpstat %nice), percent.
    pub nice_pct: f64,
    /// Kernel mode excluding interrupts (mpstat %sys), percent.
    pub system_pct: f64,
    /// Idle with disk I/O outstanding (mpstat %iowait), percent.
    pub iowait_pct: f64,
    /// Hard and soft interrupts (mpstat %irq + %soft), percent.
    pub irq_pct: f64,
    /// Stolen by the hypervisor (mpstat %steal), percent.
    pub steal_pct: f64,
    /// Running virtual CPUs of guests, niced or not (mpstat %guest + %gnice), percent.
    pub guest_pct: f64,
    /// Idle (mpstat %idle), percent.
    pub idle_pct: f64,
}

impl HostCpu {
    /// Sum of all shares, percent; 100 up to rounding.
    pub fn total_pct(&self) -> f64 {
        self.user_pct
            + self.nice_pct
            + self.system_pct
            + self.iowait_pct
            + self.irq_pct
            + self.steal_pct
            + self.guest_pct
            + self.idle_pct
    }
}

/// Storage traffic of one whole disk over one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIo {
    /// Device name as in `/proc/diskstats` (vda, sda, nvme0n1).
    pub name: String,
    /// Bytes read in the interval (sectors × 512).
    pub read_bytes: u64,
    /// Bytes written in the interval (sectors × 512).
    pub written_bytes: u64,
}

/// Traffic of one network interface over one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceIo {
    /// Interface name as in `/proc/net/dev` (lo, eth0).
    pub name: String,
    /// Bytes received in the interval.
    pub rx_bytes: u64,
    /// Packets received in the interval.
    pub rx_packets: u64,
    /// Bytes sent in the interval.
    pub tx_bytes: u64,
    /// Packets sent in the interval.
    pub tx_packets: u64,
}

/// The host at one sample. Interval values are `None` on the first sample and when the
/// source file could not be read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostSample {
    /// Online CPUs (the `cpuN` lines of `/proc/stat`).
    pub cpu_count: u32,
    /// CPU shares over the interval.
    pub cpu: Option<HostCpu>,
    /// One-minute load average now (runnable + uninterruptible tasks, decayed).
    pub load_1m: Option<f64>,
    /// Memory in use now (MemTotal − MemAvailable), bytes.
    pub memory_used_bytes: Option<u64>,
    /// Page cache now (Cached), bytes.
    pub page_cache_bytes: Option<u64>,
    /// Traffic of each whole physical disk over the interval.
    pub disks: Option<Vec<DeviceIo>>,
    /// Traffic of each network interface over the interval, `lo` included.
    pub network: Option<Vec<InterfaceIo>>,
}

impl HostSample {
    /// Bytes read from all counted disks in the interval.
    pub fn disk_read_bytes(&self) -> Option<u64> {
        Some(self.disks.as_ref()?.iter().map(|d| d.read_bytes).sum())
    }

    /// Bytes written to all counted disks in the interval.
    pub fn disk_written_bytes(&self) -> Option<u64> {
        Some(self.disks.as_ref()?.iter().map(|d| d.written_bytes).sum())
    }

    /// Traffic summed over all interfaces (`lo` included) in the interval, as one
    /// `InterfaceIo` named "all".
    pub fn network_total(&self) -> Option<InterfaceIo> {
        let mut total = InterfaceIo {
            name: "all".to_string(),
            rx_bytes: 0,
            rx_packets: 0,
            tx_bytes: 0,
            tx_packets: 0,
        };
        for interface in self.network.as_ref()? {
            total.rx_bytes += interface.rx_bytes;
            total.rx_packets += interface.rx_packets;
            total.tx_bytes += interface.tx_bytes;
            total.tx_packets += interface.tx_packets;
        }
        Some(total)
    }

    /// Traffic of the loopback interface `lo` in the interval.
    pub fn loopback(&self) -> Option<&InterfaceIo> {
        self.network.as_ref()?.iter().find(|i| i.name == "lo")
    }
}

/// Host sampling state: the previous cumulative counters.
#[derive(Debug, Default)]
pub(crate) struct HostState {
    /// The CPU counters, and when they were read.
    previous_cpu: Option<(CpuTimes, Instant)>,
    previous_disks: Option<HashMap<String, DiskCounters>>,
    previous_network: Option<HashMap<String, InterfaceCounters>>,
    /// Whether each device name seen in `/proc/diskstats` is a counted whole disk; decided
    /// once per name.
    counted_disks: HashMap<String, bool>,
}

impl HostState {
    pub fn sample(&mut self, source: &mut impl ProcSource) -> HostSample {
        let mut sample = HostSample::default();

        let stat = source.cpu();
        let read_at = Instant::now();
        if let Some((times, cpu_count)) = stat {
            sample.cpu_count = cpu_count;
            if let Some((previous, previous_at)) = self.previous_cpu {
                let elapsed_s = read_at.duration_since(previous_at).as_secs_f64();
                let ticks = elapsed_s * clock_ticks_per_second() as f64 * f64::from(cpu_count);
                sample.cpu = cpu_shares(&previous, &times, ticks);
            }
        }
        self.previous_cpu = stat.map(|(times, _)| (times, read_at));

        sample.load_1m = source.load_1m();
        (sample.memory_used_bytes, sample.page_cache_bytes) = source.memory();

        let disks = if Path::new("/sys/block").is_dir() {
            source.disks()
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
                .map(|disk| (disk.name.clone(), disk))
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

        let network = source.interfaces().map(|interfaces| {
            interfaces
                .into_iter()
                .map(|interface| (interface.name.clone(), interface))
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

/// Increase of a cumulative counter. A device or interface that is new, or whose counter
/// went backwards (removed and created again), counts from zero.
fn counter_delta(now: u64, before: Option<u64>) -> u64 {
    match before {
        Some(before) if now >= before => now - before,
        _ => now,
    }
}

/// CPU shares between two readings of the aggregate `cpu` line, `elapsed_ticks` of all CPUs'
/// time apart (clock ticks): busy time the ticks missed is added to the busy shares (see the
/// module docs); `None` when no time passed.
pub(crate) fn cpu_shares(before: &CpuTimes, now: &CpuTimes, elapsed_ticks: f64) -> Option<HostCpu> {
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
    let busy = user + nice + system + irq + guest_all;
    let counted = busy + idle + iowait + steal;
    let missed = (elapsed_ticks - counted).max(0.0);
    let total = counted + missed;
    if total <= 0.0 {
        return None;
    }
    let pct = |ticks: f64| ticks / total * 100.0;
    // Each busy share with its part of what the ticks missed.
    let busy_pct = |ticks: f64| {
        if busy > 0.0 {
            pct(ticks * (busy + missed) / busy)
        } else {
            0.0
        }
    };
    let unsplit = if busy > 0.0 { 0.0 } else { missed };
    Some(HostCpu {
        user_pct: busy_pct(user) + pct(unsplit),
        nice_pct: busy_pct(nice),
        system_pct: busy_pct(system),
        iowait_pct: pct(iowait),
        irq_pct: busy_pct(irq),
        steal_pct: pct(steal),
        guest_pct: busy_pct(guest_all),
        idle_pct: pct(idle),
    })
}

/// Whether a `/proc/diskstats` name is a whole physical disk (see the module docs).
fn is_whole_physical_disk(name: &str) -> bool {
    if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
        return false;
    }
    // diskstats writes '/' in names (cciss/c0d0) where sysfs uses '!'.
    let dir = Path::new("/sys/block").join(name.replace('/', "!"));
    if !dir.is_dir() || dir.join("partition").exists() {
        return false;
    }
    match std::fs::read_dir(dir.join("slaves")) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_take_guest_out_of_user_and_add_up_to_100() {
        let before = CpuTimes::default();
        let now = CpuTimes {
            user: 50,
            nice: 10,
            system: 20,
            idle: 100,
            iowait: 5,
            irq: 3,
            softirq: 2,
            steal: 4,
            guest: 6,
            guest_nice: 1,
        };
        let cpu = cpu_shares(&before, &now, 194.0).unwrap();
        // Total: (50−6) + (10−1) + 20 + 100 + 5 + 5 + 4 + 7 = 194 ticks.
        assert!((cpu.user_pct - 44.0 / 194.0 * 100.0).abs() < 1e-9);
        assert!((cpu.nice_pct - 9.0 / 194.0 * 100.0).abs() < 1e-9);
        assert!((cpu.irq_pct - 5.0 / 194.0 * 100.0).abs() < 1e-9);
        assert!((cpu.guest_pct - 7.0 / 194.0 * 100.0).abs() < 1e-9);
        assert!((cpu.total_pct() - 100.0).abs() < 1e-9);
        assert_eq!(cpu_shares(&now, &now, 0.0), None);
        // A reading a little late for its ticks (the CPUs' time below the fields' sum)
        // divides by the sum.
        let late = cpu_shares(&before, &now, 190.0).unwrap();
        assert!((late.user_pct - cpu.user_pct).abs() < 1e-9);
    }

    #[test]
    fn busy_time_the_ticks_missed_is_split_over_the_busy_shares() {
        let before = CpuTimes::default();
        // 2 CPUs for 1 s at 100 ticks a second: 200 ticks of time. Idle and iowait are
        // exact (150 + 10); the busy ticks caught 20 of the 40 busy ticks' time.
        let now = CpuTimes {
            user: 12,
            system: 6,
            idle: 150,
            iowait: 10,
            irq: 2,
            ..CpuTimes::default()
        };
        let cpu = cpu_shares(&before, &now, 200.0).unwrap();
        assert!((cpu.user_pct - 12.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.system_pct - 6.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.irq_pct - 2.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.idle_pct - 75.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.iowait_pct - 5.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.total_pct() - 100.0).abs() < 1e-9);
        // No busy tick at all: what was missed is user time.
        let quiet = CpuTimes {
            idle: 190,
            ..CpuTimes::default()
        };
        let cpu = cpu_shares(&before, &quiet, 200.0).unwrap();
        assert!((cpu.user_pct - 5.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.total_pct() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn counters_that_restart_count_from_zero() {
        assert_eq!(counter_delta(150, Some(100)), 50);
        assert_eq!(counter_delta(30, Some(100)), 30);
        assert_eq!(counter_delta(30, None), 30);
    }

    #[test]
    fn partitions_and_memory_devices_are_not_disks() {
        assert!(!is_whole_physical_disk("loop0"));
        assert!(!is_whole_physical_disk("zram0"));
        assert!(!is_whole_physical_disk("no-such-device-42"));
    }
}
