//! The table of a run's shards, in shards.csv and on the terminal: each shard's rate, CPU,
//! memory, schedule lag and clock, to find an overloaded load generator.

use std::fmt::Write as _;

use super::merge_read::ShardFolder;

/// The per-shard table, beside summary.json.
pub const SHARDS_FILE: &str = "shards.csv";

pub(super) struct ShardTable {
    pub(super) csv: String,
    pub(super) text: String,
}

/// Rate, CPU, memory, schedule lag and clock of each shard.
pub(super) fn shard_table(shards: &[ShardFolder]) -> ShardTable {
    let mut csv = String::from(
        "shard,host,producers,consumers,target_msg_s,acknowledged_msg_s,received_msg_s,cpu_user_s,cpu_system_s,cpu_s_per_million,peak_rss_bytes,schedule_lag_p99_ns,schedule_lag_max_ns,client_bound,clock_offset_ns,clock_round_trip_ns\n",
    );
    let mut text = String::from(
        "shards       producers consumers   target msg/s   ack. msg/s   recv. msg/s  CPU-s/M   RSS MiB  lag p99    lag max  clock offset\n",
    );
    for s in shards {
        let m = &s.summary;
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{:.1},{:.1},{:.3},{:.3},{},{},{},{},{},{},{}",
            s.shard.shard,
            s.shard.host,
            s.shard.producers.len(),
            s.shard.consumers.len(),
            m.target_rate.map_or(String::new(), |r| format!("{r:.1}")),
            m.throughput.acknowledged_per_s,
            m.throughput.received_per_s,
            m.client.cpu_user_s,
            m.client.cpu_system_s,
            m.client
                .cpu_s_per_million_messages
                .map_or(String::new(), |c| format!("{c:.3}")),
            m.client.peak_rss_bytes,
            m.latency.schedule_lag.p99_ns,
            m.latency.schedule_lag.max_ns,
            m.client_bound,
            s.shard.clock.offset_ns,
            s.shard.clock.round_trip_ns
        );
        let _ = writeln!(
            text,
            "  {:<10} {:>9} {:>9} {:>14} {:>12.0} {:>13.0} {:>8} {:>9.1} {:>8} {:>10}  {}{}",
            format!("{}/{}", s.shard.shard, s.shard.shards),
            s.shard.producers.len(),
            s.shard.consumers.len(),
            m.target_rate
                .map_or("max".to_string(), |r| format!("{r:.0}")),
            m.throughput.acknowledged_per_s,
            m.throughput.received_per_s,
            m.client
                .cpu_s_per_million_messages
                .map_or("-".to_string(), |c| format!("{c:.2}")),
            m.client.peak_rss_bytes as f64 / (1024.0 * 1024.0),
            brokerbench_model::units::format_nanos(m.latency.schedule_lag.p99_ns),
            brokerbench_model::units::format_nanos(m.latency.schedule_lag.max_ns),
            format_offset(s.shard.clock),
            if m.client_bound { "  CLIENT-BOUND" } else { "" }
        );
    }
    ShardTable { csv, text }
}

fn format_offset(clock: crate::shards::ClockEstimate) -> String {
    format!(
        "{:+.3} ms ± {:.3}",
        clock.offset_ns as f64 / 1e6,
        clock.round_trip_ns as f64 / 2e6
    )
}
