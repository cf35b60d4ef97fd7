//! resources.csv: one row per sample, with fixed columns so that scripts and the report can
//! rely on them. Per-device and per-interface values vary between hosts, so only their
//! totals (and the loopback interface) have columns.
//!
//! Interval columns (CPU %, bytes, packets) cover the `interval_s` seconds before `time_ns`;
//! instant columns (RSS, threads, memory, load) are the values at `time_ns`. A cell is empty
//! when the value is unknown: first sample, no such target, process lost, file unreadable.
//! Process CPU is percent of one core; host CPU is percent of all cores.
//!
//! A broker of several nodes has the fixed columns (`broker_*`, the nodes' sum) and, after
//! them, each node's own: `broker_node1_alive` … `broker_node1_threads`, then node 2's, and so
//! on ([`node_columns`]).

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

/// What each process has in resources.csv, after its prefix (`broker_`, `client_`,
/// `broker_node2_`).
const PROCESS_COLUMNS: [&str; 8] = [
    "alive",
    "processes",
    "cpu_user_pct",
    "cpu_system_pct",
    "rss_bytes",
    "disk_read_bytes",
    "disk_written_bytes",
    "threads",
];

/// The per-node columns of a broker whose sampled nodes are `nodes` (their ids; none for one
/// node), after the fixed ones.
pub fn node_columns(nodes: &[u32]) -> Vec<String> {
    if nodes.len() < 2 {
        return Vec::new();
    }
    nodes
        .iter()
        .flat_map(|id| PROCESS_COLUMNS.map(|c| format!("broker_node{id}_{c}")))
        .collect()
}

/// Writes resources.csv row by row with the `csv` crate, flushing each row so that an
/// interrupted run keeps everything sampled so far.
pub struct ResourcesCsv<W: Write> {
    out: csv::Writer<W>,
    row: Vec<String>,
    /// The nodes with columns, in column order.
    nodes: Vec<u32>,
}

impl<W: Write> std::fmt::Debug for ResourcesCsv<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResourcesCsv")
    }
}

impl<W: Write> ResourcesCsv<W> {
    /// Writes the header line of a broker of one node.
    pub fn new(out: W) -> io::Result<ResourcesCsv<W>> {
        ResourcesCsv::with_nodes(out, &[])
    }

    /// Writes the header line of a broker whose sampled nodes are `nodes` (their ids; each has
    /// columns when there are several).
    pub fn with_nodes(out: W, nodes: &[u32]) -> io::Result<ResourcesCsv<W>> {
        let mut out = csv::Writer::from_writer(out);
        let per_node = node_columns(nodes);
        let header = RESOURCES_COLUMNS.iter().copied();
        out.write_record(header.chain(per_node.iter().map(String::as_str)))?;
        out.flush()?;
        Ok(ResourcesCsv {
            out,
            row: Vec::with_capacity(RESOURCES_COLUMNS.len() + per_node.len()),
            nodes: if per_node.is_empty() {
                Vec::new()
            } else {
                nodes.to_vec()
            },
        })
    }

    /// Appends one row for `sample`.
    pub fn write(&mut self, sample: &Sample) -> io::Result<()> {
        let row = &mut self.row;
        row.clear();
        row.push(sample.time_ns.to_string());
        cell(row, sample.interval_s.map(|s| format!("{s:.6}")));
        for role in [Role::Broker, Role::Client] {
            process_cells(row, sample.process(role));
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
            cell(row, share.map(percent));
        }
        cell(row, host.load_1m);
        cell(row, host.memory_used_bytes);
        cell(row, host.page_cache_bytes);
        cell(row, host.disk_read_bytes());
        cell(row, host.disk_written_bytes());
        for interface in [host.network_total(), host.loopback().cloned()] {
            cell(row, interface.as_ref().map(|i| i.rx_bytes));
            cell(row, interface.as_ref().map(|i| i.tx_bytes));
            cell(row, interface.as_ref().map(|i| i.rx_packets));
            cell(row, interface.as_ref().map(|i| i.tx_packets));
        }
        for id in &self.nodes {
            process_cells(row, sample.nodes.iter().find(|p| p.node == Some(*id)));
        }
        self.out.write_record(row.iter())?;
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

fn percent(value: f64) -> String {
    format!("{value:.3}")
}

/// One cell: empty when the value is unknown.
fn cell(row: &mut Vec<String>, value: Option<impl std::fmt::Display>) {
    row.push(value.map(|v| v.to_string()).unwrap_or_default());
}

/// The cells of [`PROCESS_COLUMNS`], in order.
fn process_cells(row: &mut Vec<String>, process: Option<&ProcessSample>) {
    cell(row, process.map(|p| p.alive));
    cell(row, process.filter(|p| p.alive).map(|p| p.processes));
    cell(row, process.and_then(|p| p.cpu_user_pct).map(percent));
    cell(row, process.and_then(|p| p.cpu_system_pct).map(percent));
    cell(row, process.and_then(|p| p.rss_bytes));
    cell(row, process.and_then(|p| p.disk_read_bytes));
    cell(row, process.and_then(|p| p.disk_written_bytes));
    cell(row, process.and_then(|p| p.threads));
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

    #[test]
    fn a_process_has_the_same_columns_under_each_prefix() {
        for prefix in ["broker_", "client_"] {
            let fixed: Vec<&str> = RESOURCES_COLUMNS
                .iter()
                .filter_map(|c| c.strip_prefix(prefix))
                .collect();
            assert_eq!(fixed, PROCESS_COLUMNS);
        }
        assert!(node_columns(&[1]).is_empty());
        let two_of_three = node_columns(&[1, 3]);
        assert_eq!(two_of_three.len(), 16);
        assert_eq!(two_of_three[0], "broker_node1_alive");
        assert_eq!(
            two_of_three[8], "broker_node3_alive",
            "named by node, not position"
        );
        assert_eq!(two_of_three[15], "broker_node3_threads");
    }
}
