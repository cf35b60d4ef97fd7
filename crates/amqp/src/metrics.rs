//! What RabbitMQ's metrics endpoint (the rabbitmq_prometheus plugin) serves, and what each
//! figure means (docs/src/broker-metrics.md).

use brokerbench_metrics::{counter, gauge, Combine, Format, MetricSet, MetricSpec, MESSAGES_IN};

/// RabbitMQ's metric set: the rabbitmq_prometheus plugin's endpoint.
pub static METRICS: MetricSet = MetricSet {
    source: "rabbitmq",
    format: Format::Prometheus {
        marker: "rabbitmq_",
    },
    specs: SPECS,
};

/// RabbitMQ through the rabbitmq_prometheus plugin (aggregated /metrics).
const SPECS: &[MetricSpec] = &[
    counter(MESSAGES_IN, "rabbitmq_global_messages_received_total", None),
    counter(
        "messages_confirmed_per_second",
        "rabbitmq_global_messages_confirmed_total",
        None,
    ),
    counter(
        "messages_delivered_per_second",
        "rabbitmq_global_messages_delivered_total",
        None,
    ),
    counter(
        "messages_routed_per_second",
        "rabbitmq_global_messages_routed_total",
        None,
    ),
    gauge("queue_messages", "rabbitmq_queue_messages", None, 1.0),
    // Quorum queues' Raft logs: how far each node's members have committed (their indexes
    // summed), so a member down or behind shows beside the others; the cluster's figure is
    // the most advanced node's. A gauge: RabbitMQ refreshes it only every 5 s (its
    // collect_statistics_interval), too seldom for a rate per second.
    MetricSpec {
        combine: Combine::MaxPerSeries,
        per_node: true,
        ..gauge(
            "raft_committed_entries",
            "rabbitmq_raft_log_commit_index",
            None,
            1.0,
        )
    },
    gauge(
        "resident_memory_bytes",
        "rabbitmq_process_resident_memory_bytes",
        None,
        1.0,
    ),
];
