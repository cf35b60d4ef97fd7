//! Sample rows and summaries for the unit tests.

use std::collections::BTreeMap;

use brokerbench_model::*;

/// A measurement-phase row with round numbers and empty histograms.
pub(crate) fn row(second: u64, start_ns: u64) -> IntervalRow {
    IntervalRow {
        second,
        phase: Phase::Measurement,
        start_ns,
        sent: 100,
        acknowledged: 90,
        failed: 1,
        received: 80,
        bytes_acknowledged: 9000,
        bytes_received: 8000,
        backlog: Some(10),
        acknowledged_rate_1m: 12.5,
        publish: new_histogram(),
        end_to_end: new_histogram(),
        schedule_lag: new_histogram(),
        schedule_lag_max_ns: 2_500,
        disconnected_producers: 0,
        blocked_producers: 0,
    }
}

fn latency(p50_ns: u64) -> LatencySummary {
    LatencySummary {
        count: 1_800_000,
        min_ns: p50_ns / 2,
        mean_ns: p50_ns as f64 * 1.25,
        p50_ns,
        p75_ns: p50_ns * 2,
        p90_ns: p50_ns * 3,
        p95_ns: p50_ns * 4,
        p99_ns: p50_ns * 10,
        p999_ns: p50_ns * 20,
        p9999_ns: p50_ns * 40,
        max_ns: p50_ns * 100,
    }
}

/// A clean, complete 30-second open-loop run at 60,000 msg/s.
pub(crate) fn summary() -> Summary {
    let counts = Counts {
        sent: 1_800_000,
        acknowledged: 1_800_000,
        failed: 0,
        received: 1_800_000,
        bytes_sent: 180_000_000,
        bytes_acknowledged: 180_000_000,
        bytes_received: 180_000_000,
    };
    Summary {
        status: RunStatus::Complete,
        workload: "quickstart".into(),
        driver: "kafka".into(),
        mode: "open-loop".into(),
        target_rate: Some(60_000.0),
        measurement_s: 30.0,
        window: counts.clone(),
        total: counts,
        throughput: Throughput {
            acknowledged_per_s: 59_998.4,
            sent_per_s: 60_000.0,
            received_per_s: 59_997.0,
            acknowledged_mb_per_s: 6.0,
            received_mb_per_s: 6.0,
        },
        latency: Latencies {
            publish: latency(1_230_000),
            end_to_end: latency(2_000_000),
            service_time: latency(900_000),
            schedule_lag: latency(12_000),
        },
        integrity: Integrity {
            checked: true,
            ..Integrity::default()
        },
        consumers: vec![ConsumerShare {
            topic: 0,
            subscription: 0,
            member: 0,
            received: 1_800_000,
        }],
        errors: BTreeMap::new(),
        not_sent_at_window_end: 0,
        client: ClientCost {
            cpu_user_s: 3.0,
            cpu_system_s: 0.78,
            cpu_s_per_million_messages: Some(2.1),
            peak_rss_bytes: 45 * 1024 * 1024,
            allocations_per_message: None,
        },
        resources: None,
        broker_metrics: None,
        client_bound: false,
        broker_bound: false,
        notes: Vec::new(),
        backlog: None,
        outages: Vec::new(),
        stalls: Vec::new(),
        slowdowns: Vec::new(),
        blocks: Vec::new(),
        faults: Vec::new(),
    }
}
