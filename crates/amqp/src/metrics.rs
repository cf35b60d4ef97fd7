//! What RabbitMQ's metrics endpoint (the rabbitmq_prometheus plugin) serves, and what each
//! figure means (docs/src/broker-metrics.md).

use brokerbench_metrics::{counter, gauge, Format, MetricSet, MetricSpec, MESSAGES_IN};

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
    gauge(
        "resident_memory_bytes",
        "rabbitmq_process_resident_memory_bytes",
        None,
        1.0,
    ),
];
