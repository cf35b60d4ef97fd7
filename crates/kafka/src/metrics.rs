//! What Kafka's metrics endpoint (the Prometheus JMX exporter agent the managed broker runs)
//! serves, and what each figure means (docs/src/broker-metrics.md).

use brokerbench_metrics::{
    counter, gauge, time_ratio, Combine, Format, MetricSet, MetricSpec, MESSAGES_IN,
};

/// Kafka (4.1, KRaft) through the Prometheus JMX exporter (lowercase output names). Only
/// cumulative counts are turned into figures where Kafka offers them: its meters' one-minute
/// rates and its own windowed ratios are long-run averages, not what happened in a second.
const SPECS: &[MetricSpec] = &[
    counter(
        MESSAGES_IN,
        "kafka_server_brokertopicmetrics_count",
        Some("MessagesInPerSec"),
    ),
    counter(
        "bytes_in_per_second",
        "kafka_server_brokertopicmetrics_count",
        Some("BytesInPerSec"),
    ),
    // The idle meter's count: nanoseconds each handler waited for a request, divided by its
    // pool's size. In combined mode the broker's and the controller's pools mark the same
    // meter (Kafka 4.1), so its rate runs to 2; the controller's metrics give that away.
    MetricSpec {
        halved_when: Some((
            "kafka_controller_kafkacontroller_value",
            ("name", "ActiveControllerCount"),
        )),
        ..time_ratio(
            "request_handler_idle_ratio",
            "kafka_server_kafkarequesthandlerpool_count",
            Some("RequestHandlerAvgIdlePercent"),
        )
    },
    // Each network processor's cumulative time waiting in select(), the brokers' listeners
    // only: Kafka's NetworkProcessorAvgIdlePercent gauge is a 30-second-window average, capped
    // at 1 per processor, and in combined mode it is the controller listener's.
    MetricSpec {
        label: None,
        without_label: None,
        excluded_label: Some(("listener", "CONTROLLER")),
        combine: Combine::Mean,
        ..time_ratio(
            "network_processor_idle_ratio",
            "kafka_server_socket_server_metrics_io_wait_time_ns",
            None,
        )
    },
    gauge(
        "request_queue_size",
        "kafka_network_requestchannel_value",
        Some("RequestQueueSize"),
        1.0,
    ),
    // Replication health, each node's too: which node lost followers, and whose partitions
    // moved to whom when a node failed.
    MetricSpec {
        per_node: true,
        ..gauge(
            "under_replicated_partitions",
            "kafka_server_replicamanager_value",
            Some("UnderReplicatedPartitions"),
            1.0,
        )
    },
    MetricSpec {
        per_node: true,
        ..gauge(
            "under_min_isr_partitions",
            "kafka_server_replicamanager_value",
            Some("UnderMinIsrPartitionCount"),
            1.0,
        )
    },
    MetricSpec {
        per_node: true,
        ..gauge(
            "leader_partitions",
            "kafka_server_replicamanager_value",
            Some("LeaderCount"),
            1.0,
        )
    },
    counter(
        "log_flushes_per_second",
        "kafka_log_logflushstats_count",
        Some("LogFlushRateAndTimeMs"),
    ),
    // Kafka's timer keeps no sum, only a mean over every flush since the broker started.
    gauge(
        "log_flush_seconds_mean_since_start",
        "kafka_log_logflushstats_mean",
        Some("LogFlushRateAndTimeMs"),
        1e-3,
    ),
    MetricSpec {
        label: Some(("area", "heap")),
        ..gauge("jvm_heap_used_bytes", "jvm_memory_used_bytes", None, 1.0)
    },
    counter(
        "jvm_gc_seconds_per_second",
        "jvm_gc_collection_seconds_sum",
        None,
    ),
];

/// Kafka's metric set: the JMX exporter's Prometheus endpoint.
pub static METRICS: MetricSet = MetricSet {
    source: "kafka",
    format: Format::Prometheus {
        marker: "kafka_server_",
    },
    specs: SPECS,
};
