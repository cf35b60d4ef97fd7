//! OMB's max-rate workload files on the managed Kafka: run as OMB's own worker runs them,
//! with real latency in the terminal and in omb-result.json.

use super::*;

/// The fields of OMB's `workloads/max-rate-1-topic-1-partition-1p-1c-100b.yaml` (commit
/// 8559989), its comments kept: 10,000,000 msg/s asked of one producer.
const MAX_RATE_1P_1C_100B: &str = "name: max-rate-1-topic-1-partition-1p-1c-100b

topics: 1
partitionsPerTopic: 1
messageSize: 100
#payloadFile: \"payload/payload-100b.data\"
useRandomizedPayloads: true
randomBytesRatio: 0.5
randomizedPayloadPoolSize: 1000

subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1

# Discover max-sustainable rate
producerRate: 10000000

consumerBacklogSizeGB: 0
testDurationMinutes: 5
";

/// OMB's aggregated latency fields of publish and end-to-end latency, in milliseconds.
const LATENCY_FIELDS: [&str; 2] = ["aggregatedPublishLatency", "aggregatedEndToEndLatency"];

#[test]
fn an_omb_max_rate_file_runs_as_a_closed_loop_with_every_latency_recorded() {
    let _turn = serial();
    kafka();
    let dir = tempfile::tempdir().unwrap();
    let workload = write(
        dir.path(),
        "max-rate-1-topic-1-partition-1p-1c-100b.yaml",
        MAX_RATE_1P_1C_100B,
    );
    let driver = write(dir.path(), "kafka-throughput.yaml", OMB_BIG_THROUGHPUT);
    // Five minutes shortened to 1.2 s, OMB's one-minute warm-up to none. The closed loop
    // acknowledged 1.69M msg/s here, its consumer received 0.28M msg/s and caught up in the
    // drain (the last of 10.2M messages of a 6-s run 47 s after its send): a drain of 90 s for
    // the 2M of this run on a busy host.
    let run = run(&[
        workload.to_str().unwrap(),
        "--driver",
        driver.to_str().unwrap(),
        "--set",
        "testDurationMinutes=0.02",
        "--set",
        "warmupDurationMinutes=0",
        "--set",
        "drain_timeout=90s",
    ]);
    let s = assert_lossless(&run);
    assert_eq!(s["mode"], "max-rate", "{s:#}");
    let notes = run.manifest()["input_notes"].to_string();
    assert!(notes.contains("rate: max"), "{notes}");
    assert!(
        run.stdout.contains("latency") && !run.stdout.contains("none recorded"),
        "{}",
        run.stdout
    );
    let omb: serde_json::Value =
        serde_json::from_str(&run.file("omb-result.json")).expect("omb-result.json");
    for field in LATENCY_FIELDS {
        for point in [
            "Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max",
        ] {
            let value = omb[format!("{field}{point}")].as_f64();
            assert!(value.is_some_and(|v| v > 0.0), "{field}{point}: {value:?}");
        }
    }
}
