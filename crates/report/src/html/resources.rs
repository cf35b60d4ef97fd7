//! What the run cost the machine: the broker's, the client's and the host's CPU, memory, disk
//! writes and network over time (resources.csv), and each node's beside the broker's sum.

use serde_json::json;

use super::chart::{time_chart, Page};
use super::data::{Columns, Reduce};
use super::run_folder::RunFolder;

/// Broker, client and host resources over time (resources.csv).
pub(super) fn resources(page: &mut Page, run: &RunFolder) {
    let Some(r) = Columns::read(&run.dir.join("resources.csv")).filter(|r| r.rows > 0) else {
        return;
    };
    let rx: Vec<f64> = r
        .get("time_ns")
        .map(|v| {
            v.iter()
                .map(|t| t.unwrap_or(0.0) / 1e9 - run.start_s)
                .collect()
        })
        .unwrap_or_default();
    page.body.push_str("<div class=\"grid2\">");
    broker_client_cpu_chart(page, &r, &rx);
    broker_memory_disk_chart(page, &r, &rx);
    host_cpu_chart(page, &r, &rx);
    host_network_chart(page, &r, &rx);
    let per_s = |name: &str| bytes_per_second(&r, name);
    for (spec, title, note) in super::nodes::charts(&r, &rx, per_s) {
        page.add_chart(spec, title, note);
    }
    page.body.push_str("</div>");
}

/// A column of resources.csv (empty when it is absent).
fn column(r: &Columns, name: &str) -> Vec<Option<f64>> {
    r.get(name).cloned().unwrap_or_default()
}

/// A column of per-interval byte counts of resources.csv, as bytes per second.
fn bytes_per_second(r: &Columns, name: &str) -> Vec<Option<f64>> {
    let interval = column(r, "interval_s");
    column(r, name)
        .iter()
        .zip(&interval)
        .map(|(b, i)| match (b, i) {
            (Some(b), Some(i)) if *i > 0.0 => Some(b / i),
            _ => None,
        })
        .collect()
}

/// The broker's and the client's CPU, user and system.
fn broker_client_cpu_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    page.add_chart(
        time_chart(
            "cpu",
            rx,
            vec![
                (
                    "broker usr",
                    column(r, "broker_cpu_user_pct"),
                    Reduce::Max,
                    0,
                ),
                (
                    "broker sys",
                    column(r, "broker_cpu_system_pct"),
                    Reduce::Max,
                    0,
                ),
                (
                    "client usr",
                    column(r, "client_cpu_user_pct"),
                    Reduce::Max,
                    0,
                ),
                (
                    "client sys",
                    column(r, "client_cpu_system_pct"),
                    Reduce::Max,
                    0,
                ),
            ],
            json!({"yLabel": "% of one core", "unitY": "pct", "height": 220}),
        ),
        "Broker and client CPU",
        "percent of one core, user and system",
    );
}

/// The broker's resident memory and what it wrote to disk per second; no chart when no broker
/// process was sampled (a broker brokerbench does not manage and was not pointed at, or the
/// in-memory mock).
fn broker_memory_disk_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    if column(r, "broker_rss_bytes").iter().all(Option::is_none) {
        return;
    }
    page.add_chart(
        time_chart(
            "broker-memory-disk",
            rx,
            vec![
                ("broker RSS", column(r, "broker_rss_bytes"), Reduce::Max, 0),
                (
                    "broker disk written/s",
                    bytes_per_second(r, "broker_disk_written_bytes"),
                    Reduce::Mean,
                    1,
                ),
            ],
            json!({"yLabel": "RSS", "unitY": "bytes", "y2Label": "written per second", "unitY2": "bytes", "height": 220}),
        ),
        "Broker memory and disk writes",
        "resident set size; bytes really sent to storage per second",
    );
}

/// The host's CPU: user, system, I/O wait and interrupts.
fn host_cpu_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    page.add_chart(
        time_chart(
            "host-cpu",
            rx,
            vec![
                ("usr", column(r, "host_cpu_user_pct"), Reduce::Max, 0),
                ("sys", column(r, "host_cpu_system_pct"), Reduce::Max, 0),
                ("iowait", column(r, "host_cpu_iowait_pct"), Reduce::Max, 0),
                ("irq", column(r, "host_cpu_irq_pct"), Reduce::Max, 0),
            ],
            json!({"yLabel": "% of all CPUs", "unitY": "pct", "height": 220}),
        ),
        "Host CPU",
        "percent of all CPUs, as mpstat computes it",
    );
}

/// The host's network traffic per second, received and sent.
fn host_network_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    page.add_chart(
        time_chart(
            "host-net",
            rx,
            vec![
                (
                    "received/s",
                    bytes_per_second(r, "host_net_rx_bytes"),
                    Reduce::Mean,
                    0,
                ),
                (
                    "sent/s",
                    bytes_per_second(r, "host_net_tx_bytes"),
                    Reduce::Mean,
                    0,
                ),
            ],
            json!({"yLabel": "bytes per second", "unitY": "bytes", "height": 220}),
        ),
        "Host network (all interfaces, loopback included)",
        "",
    );
}
