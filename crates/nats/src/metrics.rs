//! What the NATS server's monitoring endpoints serve, and what each figure means
//! (docs/src/broker-metrics.md).

use brokerbench_metrics::{
    counter, gauge, unlabelled, Combine, Format, MetricSet, MetricSpec, MESSAGES_IN,
};

/// From the monitoring endpoints: `/varz` (server) and `/jsz?streams=true` (JetStream), of
/// every server of a cluster. The count compared with brokerbench's is the sum of the streams'
/// last sequence numbers: every message a stream stored, whatever its limits later discarded —
/// each stream once, however many servers hold a replica of it (the highest a server says, so
/// an election or a server down changes nothing). The servers' own totals (`/varz` messages and
/// bytes in and out, `/jsz` messages, bytes and storage) are summed: what the cluster's servers
/// handled and the copies they store.
const SPECS: &[MetricSpec] = &[
    MetricSpec {
        absent_is_zero: true,
        combine: Combine::MaxPerSeries,
        ..unlabelled(counter(
            MESSAGES_IN,
            "jsz.account_details.stream_detail.state.last_seq",
            None,
        ))
    },
    unlabelled(counter(
        "server_messages_in_per_second",
        "varz.in_msgs",
        None,
    )),
    unlabelled(counter(
        "server_messages_out_per_second",
        "varz.out_msgs",
        None,
    )),
    unlabelled(counter("server_bytes_in_per_second", "varz.in_bytes", None)),
    unlabelled(gauge("stream_messages", "jsz.messages", None, 1.0)),
    unlabelled(gauge("stream_bytes", "jsz.bytes", None, 1.0)),
    unlabelled(gauge("jetstream_memory_bytes", "jsz.memory", None, 1.0)),
    unlabelled(gauge("jetstream_storage_bytes", "jsz.storage", None, 1.0)),
    // A replica's lag as a server holding the stream sees it (the leader knows it; absent
    // when nothing lags); each stream's replica counted once, at the most a server says.
    MetricSpec {
        absent_is_zero: true,
        combine: Combine::MaxPerSeries,
        per_node: true,
        ..unlabelled(gauge(
            "stream_replica_lag_entries",
            "jsz.account_details.stream_detail.cluster.replicas.lag",
            None,
            1.0,
        ))
    },
    unlabelled(gauge("resident_memory_bytes", "varz.mem", None, 1.0)),
    unlabelled(gauge("slow_consumers", "varz.slow_consumers", None, 1.0)),
];

/// NATS's metric set: its JSON monitoring endpoints.
pub static METRICS: MetricSet = MetricSet {
    source: "nats",
    format: Format::Json {
        paths: &["/varz", "/jsz?accounts=true&streams=true"],
    },
    specs: SPECS,
};
