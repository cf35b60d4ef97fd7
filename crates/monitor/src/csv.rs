//! resources.csv: one row per sample, with fixed columns so that scripts and the report can
//! rely on them. Per-device and per-interface values vary between hosts, so only their
//! totals (and the loopback interface) have columns.
//!
//! Interval columns (CPU %, bytes, packets) cover the `interval_s` seconds before `time_ns`;
//! instant columns (RSS, threads, memory, load) are the values at `time_ns`. A cell is empty
//! when the value is unknown: first sample, no such target, process lost, file unreadable.
//! Process CPU is percent of one core; host CPU is percent of all cores.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::process::{ProcessSample, Role};
use crate::sampler::Sample;

/// Column names of resources.csv, in order; `resources-columns.txt` in this crate holds the
/// committed copy and a test keeps them equal, so a change is deliberate.
pub const RESOURCES_COLUMNS: &[&str] = &[
    "time_ns",
    "interval_s",
    "broker_alive",
    "broker_processes",
    "broker_cpu_user_pct",
    "broker_cpu_system_pct",
    "broker_rss_bytes",
    "broker_disk_read_bytes",
    "broker_disk_written_bytes",
    "broker_threads",
    "client_alive",
    "client_processes",
    "client_cpu_user_pct",
    "client_cpu_system_pct",
    "client_rss_bytes",
    "client_disk_read_bytes",
    "client_disk_written_bytes",
    "client_threads",
    "host_cpu_user_pct",
    "host_cpu_nice_pct",
    "host_cpu_system_pct",
    "host_cpu_iowait_pct",
    "host_cpu_irq_pct",
    "host_cpu_steal_pct",
    "host_cpu_guest_pct",
    "host_cpu_idle_pct",
    "host_load_1m",
    "host_memory_used_bytes",
    "host_page_cache_bytes",
    "host_disk_read_bytes",
    "host_disk_written_bytes",
    "host_net_rx_bytes",
    "host_net_tx_bytes",
    "host_net_rx_packets",
    "host_net_tx_packets",
    "lo_rx_bytes",
    "lo_tx_bytes",
    "lo_rx_packets",
    "lo_tx_packets",
];

/// Writes resources.csv row by row, flushing each row so that an interrupted run keeps
/// everything sampled so far.
#[derive(Debug)]
pub struct ResourcesCsv<W: Write> {
    out: W,
    line: String,
}

impl<W: Write> ResourcesCsv<W> {
    /// Writes the header line.
    pub fn new(mut out: W) -> io::Result<ResourcesCsv<W>> {
        writeln!(out, "{}", RESOURCES_COLUMNS.join(","))?;
        out.flush()?;
        Ok(ResourcesCsv {
            out,
            line: String::new(),
        })
    }

    /// Appends one row for `sample`.
    pub fn write(&mut self, sample: &Sample) -> io::Result<()> {
        self.line.clear();
        let line = &mut self.line;
        let _ = write!(line, "{}", sample.time_ns);
        cell(line, sample.interval_s.map(|s| format!("{s:.6}")));
        for role in [Role::Broker, Role::Client] {
            process_cells(line, sample.process(role));
        }
        let host = &sample.host;
        let cpu = host.cpu;
        for share in [
            cpu.map(|c| c.user_pct),
            cpu.map(|c| c.nice_pct),
            cpu.map(|c| c.system_pct),
            cpu.map(|c| c.iowait_pct),
            cpu.map(|c| c.irq_pct),
            cpu.map(|c| c.steal_pct),
            cpu.map(|c| c.guest_pct),
            cpu.map(|c| c.idle_pct),
        ] {
            cell(line, share.map(percent));
        }
        cell(line, host.load_1m);
        cell(line, host.memory_used_bytes);
        cell(line, host.page_cache_bytes);
        cell(line, host.disk_read_bytes());
        cell(line, host.disk_written_bytes());
        for interface in [host.network_total(), host.loopback().cloned()] {
            cell(line, interface.as_ref().map(|i| i.rx_bytes));
            cell(line, interface.as_ref().map(|i| i.tx_bytes));
            cell(line, interface.as_ref().map(|i| i.rx_packets));
            cell(line, interface.as_ref().map(|i| i.tx_packets));
        }
        line.push('\n');
        self.out.write_all(line.as_bytes())?;
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

fn percent(value: f64) -> String {
    format!("{value:.3}")
}

fn cell(line: &mut String, value: Option<impl std::fmt::Display>) {
    line.push(',');
    if let Some(value) = value {
        let _ = write!(line, "{value}");
    }
}

fn process_cells(line: &mut String, process: Option<&ProcessSample>) {
    cell(line, process.map(|p| p.alive));
    cell(line, process.filter(|p| p.alive).map(|p| p.processes));
    cell(line, process.and_then(|p| p.cpu_user_pct).map(percent));
    cell(line, process.and_then(|p| p.cpu_system_pct).map(percent));
    cell(line, process.and_then(|p| p.rss_bytes));
    cell(line, process.and_then(|p| p.disk_read_bytes));
    cell(line, process.and_then(|p| p.disk_written_bytes));
    cell(line, process.and_then(|p| p.threads));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_column_list_matches() {
        let committed = include_str!("../resources-columns.txt");
        let listed: Vec<&str> = committed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert_eq!(listed, RESOURCES_COLUMNS);
    }
}
