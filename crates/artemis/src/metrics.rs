//! What Artemis's management API serves through the console's Jolokia endpoint, and what
//! each figure means (docs/src/broker-metrics.md).

use brokerbench_metrics::{counter, gauge, unlabelled, Format, MetricSet, MetricSpec, MESSAGES_IN};

/// The addresses' and the broker's attributes. The count compared with brokerbench's is the
/// addresses' `RoutedMessageCount` and `UnRoutedMessageCount` (the `*` matches both): every
/// message an address took, once however many subscriptions' queues it reached, or none (a
/// run without consumers has no queues); the broker's `TotalMessagesAdded`, the queues' sum,
/// counts a message once per subscription. Only addresses whose name holds a `-` are read, as
/// brokerbench's do (`<prefix>-<workload>-<run id>-<topic>`): not the answers to the
/// management operations brokerbench asks for (`brokerbench.management.*`) nor the broker's
/// own (`activemq.notifications`). Jolokia answers a read of a pattern with one entry per
/// MBean, keyed by its name, which each path's `*` matches: every address (or broker) is its
/// own series, and a figure their sum.
const SPECS: &[MetricSpec] = &[
    MetricSpec {
        absent_is_zero: true,
        ..unlabelled(counter(MESSAGES_IN, "read.value.*RoutedMessageCount", None))
    },
    unlabelled(counter(
        "queue_messages_added_per_second",
        "read.value.*.TotalMessagesAdded",
        None,
    )),
    unlabelled(counter(
        "queue_messages_acknowledged_per_second",
        "read.value.*.TotalMessagesAcknowledged",
        None,
    )),
    unlabelled(gauge(
        "queued_messages",
        "read.value.*.TotalMessageCount",
        None,
        1.0,
    )),
    unlabelled(gauge(
        "address_memory_bytes",
        "read.value.*.AddressMemoryUsage",
        None,
        1.0,
    )),
    unlabelled(gauge(
        "disk_store_usage_ratio",
        "read.value.*.DiskStoreUsage",
        None,
        1.0,
    )),
    unlabelled(gauge(
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
            "/read/org.apache.activemq.artemis:broker=*,component=addresses,address=%22*-*%22/RoutedMessageCount,UnRoutedMessageCount",
            "/read/org.apache.activemq.artemis:broker=*/TotalMessagesAdded,TotalMessagesAcknowledged,TotalMessageCount,AddressMemoryUsage,DiskStoreUsage,TotalConsumerCount",
        ],
    },
    specs: SPECS,
};
