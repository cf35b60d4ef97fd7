//! The shards table of a merged run (shards.csv): each load generator's rate, cost, schedule
//! lag and clock, so an overloaded one shows.

use std::fmt::Write as _;
use std::path::Path;

use brokerbench_model::units::format_nanos;

use super::esc;

/// The shards of a merged run (shards.csv): each one's rate, cost, schedule lag and clock.
pub(super) fn shards_table(dir: &Path) -> Option<String> {
    let mut reader = csv::Reader::from_path(dir.join("shards.csv")).ok()?;
    let headers = reader.headers().ok()?.clone();
    let rows: Vec<csv::StringRecord> = reader.records().flatten().collect();
    let cell = |row: &csv::StringRecord, name: &str| -> String {
        headers
            .iter()
            .position(|h| h == name)
            .and_then(|i| row.get(i))
            .unwrap_or("")
            .to_string()
    };
    let number = |row: &csv::StringRecord, name: &str| cell(row, name).parse::<f64>().ok();
    let mut body = String::from(
        "<h2>Shards <small>(each load generator: an overloaded one shows schedule lag)</small></h2><div class=\"scroll\"><table><thead><tr><th>shard</th><th class=\"text\">host</th><th>producers</th><th>consumers</th><th>target msg/s</th><th>acknowledged msg/s</th><th>received msg/s</th><th>client CPU-s per M msgs</th><th>peak RSS</th><th>schedule lag p99</th><th>schedule lag max</th><th>clock offset to shard 0</th></tr></thead><tbody>",
    );
    for row in &rows {
        let ns = |name: &str| {
            number(row, name).map_or(String::new(), |v| format_nanos(v.max(0.0) as u64))
        };
        let bound = if cell(row, "client_bound") == "true" {
            " <b>CLIENT-BOUND</b>"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{bound}</td><td>{}</td><td>{} ± {}</td></tr>",
            esc(&cell(row, "shard")),
            esc(&cell(row, "host")),
            esc(&cell(row, "producers")),
            esc(&cell(row, "consumers")),
            number(row, "target_msg_s").map_or("max".to_string(), |v| format!("{v:.0}")),
            number(row, "acknowledged_msg_s").map_or(String::new(), |v| format!("{v:.0}")),
            number(row, "received_msg_s").map_or(String::new(), |v| format!("{v:.0}")),
            number(row, "cpu_s_per_million").map_or(String::new(), |v| format!("{v:.2}")),
            number(row, "peak_rss_bytes").map_or(String::new(), |v| format!("{:.1} MiB", v / 1048576.0)),
            ns("schedule_lag_p99_ns"),
            ns("schedule_lag_max_ns"),
            number(row, "clock_offset_ns").map_or(String::new(), |v| format!("{:+.3} ms", v / 1e6)),
            number(row, "clock_round_trip_ns").map_or(String::new(), |v| format!("{:.3} ms", v / 2e6)),
        );
    }
    body.push_str("</tbody></table></div>");
    Some(body)
}
