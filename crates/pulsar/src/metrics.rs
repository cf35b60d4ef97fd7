//! What Pulsar's metrics endpoint (`/metrics/` of the web service, Prometheus text) serves,
//! and what each figure means (docs/src/broker-metrics.md).

use brokerbench_metrics::{counter, gauge, unlabelled, Format, MetricSet, MetricSpec, MESSAGES_IN};

/// Pulsar's metric set: its Prometheus endpoint, topic-level figures (the broker's default
/// `exposeTopicLevelMetricsInPrometheus=true`) summed over topics. The count compared with
/// brokerbench's is the topics' `pulsar_in_messages_total`: every message a topic (or
/// partition) took, once however many subscriptions read it; `pulsar_out_messages_total` counts
/// a message once per subscription that received it. (The broker's rates, write latencies and
/// producer and consumer counts are left out: it refreshes them once a minute, its
/// `statsUpdateFrequencyInSecs`, and counts its own system topics' clients among them.)
pub static METRICS: MetricSet = MetricSet {
    source: "pulsar",
    format: Format::Prometheus { marker: "pulsar_" },
    specs: SPECS,
};

const SPECS: &[MetricSpec] = &[
    MetricSpec {
        absent_is_zero: true,
        ..unlabelled(counter(MESSAGES_IN, "pulsar_in_messages_total", None))
    },
    MetricSpec {
        absent_is_zero: true,
        ..unlabelled(counter(
            "subscription_messages_out_per_second",
            "pulsar_out_messages_total",
            None,
        ))
    },
    // Gauges of every topic the broker holds (of other runs too): the entries its
    // subscriptions have not acknowledged (a batch is one), and the bytes it stores.
    unlabelled(gauge("backlog_entries", "pulsar_msg_backlog", None, 1.0)),
    unlabelled(gauge("storage_bytes", "pulsar_storage_size", None, 1.0)),
];
