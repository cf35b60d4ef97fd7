//! What Artemis's management API serves through the console's Jolokia endpoint, and what
//! each figure means (docs/src/broker-metrics.md).

use brokerbench_metrics::{counter, gauge, Format, MetricSet, MetricSpec, MESSAGES_IN};

/// A figure from a Jolokia read of every MBean a pattern matches (any broker name): the
/// answer is keyed by MBean name, which the `*` matches, so each address or broker is its
/// own series and the figure their sum.
const fn jolokia(spec: MetricSpec) -> MetricSpec {
    MetricSpec {
        without_label: None,
        ..spec
    }
}

/// The addresses' and the broker's attributes. The count compared with brokerbench's is the
/// addresses' `RoutedMessageCount`: every message an address took and routed to one or more
/// queues, once however many subscriptions' queues it reached (`TotalMessagesAdded`, the
/// queues' sum, counts a message once per subscription). Only addresses whose name holds a
/// `-` are read, as brokerbench's do (`<prefix>-<workload>-<run id>-<topic>`): not the
/// answers to the management operations brokerbench asks for (`brokerbench.management.*`)
/// nor the broker's own (`activemq.notifications`).
const SPECS: &[MetricSpec] = &[
    MetricSpec {
        absent_is_zero: true,
        ..jolokia(counter(
            MESSAGES_IN,
            "read.value.*.RoutedMessageCount",
            None,
        ))
    },
    jolokia(counter(
        "queue_messages_added_per_second",
        "read.value.*.TotalMessagesAdded",
        None,
    )),
    jolokia(counter(
        "queue_messages_acknowledged_per_second",
        "read.value.*.TotalMessagesAcknowledged",
        None,
    )),
    jolokia(gauge(
        "queued_messages",
        "read.value.*.TotalMessageCount",
        None,
        1.0,
    )),
    jolokia(gauge(
        "address_memory_bytes",
        "read.value.*.AddressMemoryUsage",
        None,
        1.0,
    )),
    jolokia(gauge(
        "disk_store_usage_ratio",
        "read.value.*.DiskStoreUsage",
        None,
        1.0,
    )),
    jolokia(gauge(
        "consumers",
        "read.value.*.TotalConsumerCount",
        None,
        1.0,
    )),
];

/// Artemis's metric set: two Jolokia reads, the addresses' routed counts and the broker's
/// totals.
pub static METRICS: MetricSet = MetricSet {
    source: "artemis",
    format: Format::Json {
        paths: &[
            "/read/org.apache.activemq.artemis:broker=*,component=addresses,address=%22*-*%22/RoutedMessageCount",
            "/read/org.apache.activemq.artemis:broker=*/TotalMessagesAdded,TotalMessagesAcknowledged,TotalMessageCount,AddressMemoryUsage,DiskStoreUsage,TotalConsumerCount",
        ],
    },
    specs: SPECS,
};
