//! Runs made up for the report crate's tests: a summary and one-second rows.

#![allow(dead_code)]

use std::collections::BTreeMap;

use brokerbench_model::*;

pub const START_NS: u64 = 1_795_317_554_000_000_000;
pub const SECOND: u64 = 1_000_000_000;

/// A row of `second` in `phase`, one message per latency: publish latency as given (µs),
/// end-to-end twice it.
pub fn row(second: u64, phase: Phase, latencies_us: &[u64]) -> IntervalRow {
    let mut publish = new_histogram();
    let mut end_to_end = new_histogram();
    for us in latencies_us {
        record_clamped(&mut publish, us * 1_000);
        record_clamped(&mut end_to_end, us * 2_000);
    }
    let messages = latencies_us.len() as u64;
    IntervalRow {
        second,
        phase,
        start_ns: START_NS + second * SECOND,
        sent: messages,
        acknowledged: messages,
        failed: 0,
        received: messages,
        bytes_acknowledged: 100 * messages,
        bytes_received: 100 * messages,
        backlog: Some(0),
        acknowledged_rate_1m: 0.0,
        publish,
        end_to_end,
        schedule_lag: new_histogram(),
        schedule_lag_max_ns: 1_000,
        disconnected_producers: 0,
        blocked_producers: 0,
    }
}

/// The quickstart on Kafka, `status`, at `target_rate` for `measurement_s`; nothing else
/// measured.
pub fn summary(status: RunStatus, target_rate: f64, measurement_s: f64) -> Summary {
    Summary {
        status,
        workload: "quickstart".into(),
        driver: "kafka".into(),
        mode: "open-loop".into(),
        target_rate: Some(target_rate),
        measurement_s,
        window: Counts::default(),
        total: Counts::default(),
        throughput: Throughput::default(),
        latency: Latencies::default(),
        integrity: Integrity::default(),
        consumers: vec![],
        errors: BTreeMap::new(),
        not_sent_at_window_end: 0,
        client: ClientCost::default(),
        resources: None,
        broker_metrics: None,
        client_bound: false,
        broker_bound: false,
        notes: vec![],
        backlog: None,
        outages: Vec::new(),
        stalls: Vec::new(),
        slowdowns: Vec::new(),
        blocks: Vec::new(),
        faults: Vec::new(),
    }
}
