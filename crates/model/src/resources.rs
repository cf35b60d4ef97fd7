//! What the resource monitor reports for one run: CPU, memory, disk and network use of the
//! broker, the client and the host, aggregated over the measurement window.
//!
//! Process CPU is in percent of one core (200 = two cores busy); host CPU is in percent of
//! all cores (the shares add up to 100), like `mpstat`'s but with the busy time the kernel's
//! tick samples missed counted as busy (see the monitor's host module). Megabytes are 10^6 bytes.
//! Means are time-weighted over the sampling intervals inside the window; maxima are the
//! largest per-interval value. A value is `None` when it could not be measured (for example
//! `/proc/PID/io` not readable), never a silent 0.

use serde::{Deserialize, Serialize};

/// Resource use over one measurement window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceSummary {
    /// Number of sampling intervals aggregated (those whose midpoint lies in the window).
    pub samples: u64,
    /// Configured sampling interval, seconds.
    pub interval_s: f64,
    /// Time covered by the aggregated intervals, seconds; close to the window length when
    /// sampling kept up.
    pub window_s: f64,
    /// The broker process tree; `None` when no broker process was monitored (remote broker).
    pub broker: Option<ProcessResources>,
    /// The benchmark client process itself (load generator, drivers, the monitor thread).
    pub client: Option<ProcessResources>,
    /// The whole host.
    pub host: HostResources,
    /// What the reader must know to trust the numbers: lost processes, unreadable counters.
    pub notes: Vec<String>,
}

/// Resource use of one monitored process (with its descendants when so configured).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessResources {
    /// Process id at the root of the monitored tree.
    pub root_pid: u32,
    /// Mean user-mode CPU, percent of one core.
    pub cpu_user_pct_mean: Option<f64>,
    /// Largest per-interval user-mode CPU, percent of one core.
    pub cpu_user_pct_max: Option<f64>,
    /// Mean kernel-mode CPU, percent of one core.
    pub cpu_system_pct_mean: Option<f64>,
    /// Largest per-interval kernel-mode CPU, percent of one core.
    pub cpu_system_pct_max: Option<f64>,
    /// CPU time used in the window, user + system, seconds.
    pub cpu_s: Option<f64>,
    /// Largest resident set size seen, bytes (sum over the processes of the tree).
    pub rss_bytes_max: Option<u64>,
    /// Bytes really sent to storage in the window (write_bytes − cancelled_write_bytes of
    /// `/proc/PID/io`), megabytes (10^6 bytes). Page-cache writes count when dirtied.
    pub disk_written_mb: Option<f64>,
    /// Bytes really read from storage in the window (read_bytes), megabytes (10^6 bytes);
    /// reads served from the page cache do not count.
    pub disk_read_mb: Option<f64>,
    /// Largest thread count seen (sum over the processes of the tree).
    pub threads_max: Option<u64>,
    /// When the root process was last found gone (or a zombie), ns since the UNIX epoch;
    /// `None` when it never was. A managed broker that restarted is followed to its new pid
    /// (the notes say when).
    pub lost_at_ns: Option<u64>,
}

/// Resource use of the whole host over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostResources {
    /// Number of online CPUs counted in `/proc/stat`.
    pub cpu_count: u32,
    /// Mean user-mode CPU excluding niced and guest time (mpstat %usr), percent of all CPUs.
    pub cpu_user_pct_mean: Option<f64>,
    /// Mean niced user-mode CPU (mpstat %nice), percent of all CPUs.
    pub cpu_nice_pct_mean: Option<f64>,
    /// Mean kernel-mode CPU excluding interrupts (mpstat %sys), percent of all CPUs.
    pub cpu_system_pct_mean: Option<f64>,
    /// Mean idle time with I/O outstanding (mpstat %iowait), percent of all CPUs.
    pub cpu_iowait_pct_mean: Option<f64>,
    /// Mean hard + soft interrupt time (mpstat %irq + %soft), percent of all CPUs.
    pub cpu_irq_pct_mean: Option<f64>,
    /// Mean time stolen by the hypervisor (mpstat %steal), percent of all CPUs.
    pub cpu_steal_pct_mean: Option<f64>,
    /// Mean time running guests (mpstat %guest + %gnice), percent of all CPUs.
    pub cpu_guest_pct_mean: Option<f64>,
    /// Mean idle time (mpstat %idle), percent of all CPUs.
    pub cpu_idle_pct_mean: Option<f64>,
    /// Largest one-minute load average seen (runnable + uninterruptible tasks).
    pub load_1m_max: Option<f64>,
    /// Largest memory in use seen (MemTotal − MemAvailable), bytes.
    pub memory_used_bytes_max: Option<u64>,
    /// Largest page cache seen (Cached in `/proc/meminfo`), bytes.
    pub page_cache_bytes_max: Option<u64>,
    /// Bytes written to whole physical disks in the window, megabytes (10^6 bytes).
    pub disk_written_mb: Option<f64>,
    /// Bytes read from whole physical disks in the window, megabytes (10^6 bytes).
    pub disk_read_mb: Option<f64>,
    /// Bytes received on all network interfaces including `lo`, megabytes (10^6 bytes).
    pub net_rx_mb: Option<f64>,
    /// Bytes sent on all network interfaces including `lo`, megabytes (10^6 bytes).
    pub net_tx_mb: Option<f64>,
    /// Packets received on the loopback interface `lo` in the window (a local broker's
    /// client traffic goes there).
    pub loopback_packets: Option<u64>,
    /// Bytes received on the loopback interface `lo` in the window, megabytes (10^6 bytes).
    pub loopback_mb: Option<f64>,
}

impl HostResources {
    /// Cores busy on the mean (user, nice, system, interrupts and guests; not iowait or
    /// steal), to set beside the processes' CPU in percent of one core; `None` when the host's
    /// CPU was not measured.
    pub fn busy_cores(&self) -> Option<f64> {
        let share = |v: Option<f64>| v.unwrap_or(0.0);
        let busy_pct = self.cpu_user_pct_mean?
            + self.cpu_system_pct_mean?
            + share(self.cpu_nice_pct_mean)
            + share(self.cpu_irq_pct_mean)
            + share(self.cpu_guest_pct_mean);
        Some(busy_pct / 100.0 * f64::from(self.cpu_count))
    }
}
