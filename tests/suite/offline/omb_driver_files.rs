//! The OpenMessaging Benchmark's own driver files, for every family brokerbench reads, read
//! from an OMB checkout: each is accepted with the notes that say how it was translated, or
//! refused for what brokerbench cannot honour. OMB's files are not copied into this
//! repository; point BROKERBENCH_TEST_OMB_CHECKOUT at a checkout
//! (`git clone https://github.com/openmessaging/benchmark`), or the test says it skipped.

use std::path::{Path, PathBuf};

use crate::common::*;

/// Where the test finds OMB's files.
const CHECKOUT_VARIABLE: &str = "BROKERBENCH_TEST_OMB_CHECKOUT";

/// OMB's driver folders of the families brokerbench reads (NATS Streaming is NATS's
/// predecessor, whose file must be refused with the fix).
const FOLDERS: &[&str] = &[
    "driver-kafka",
    "driver-rabbitmq",
    "driver-nats",
    "driver-nats-streaming",
    "driver-artemis",
    "driver-pulsar",
    "driver-redis",
    "driver-mqtt5",
];

/// What every Kafka file of OMB says: three replicas, a broker at localhost:9092.
const KAFKA: &[&str] = &[
    "OpenMessaging Benchmark Kafka driver file: replicationFactor 3",
    "bootstrap.servers=localhost:9092: the run uses the broker there",
];

/// Notes that only some files may have: a translation or a clamp says so, and a file whose
/// row does not expect one must not get one.
const CHOSEN: &[&str] = &["Java client's name", "clamped to", "left out"];

/// How brokerbench reads one OMB driver file.
enum Outcome {
    /// Accepted; the notes printed contain each of these.
    Accepted(&'static [&'static [&'static str]]),
    /// Refused (exit 2); the error contains each of these.
    Refused(&'static [&'static str]),
}

use Outcome::*;

/// Every top-level driver file of OMB's driver folders (commit 8559989, 2026-01-04).
const EXPECTED: &[(&str, Outcome)] = &[
    ("driver-kafka/kafka-big-batches-gzip.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-big-batches-lz4.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-big-batches-snappy.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-big-batches-zstd.yaml", Accepted(&[KAFKA])),
    (
        "driver-kafka/kafka-big-batches.yaml",
        Accepted(&[
            KAFKA,
            &["producerConfig.max.request.size=4194304 is the Java client's name for the largest produce request: passed to librdkafka as message.max.bytes"],
        ]),
    ),
    ("driver-kafka/kafka-compression-gzip.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-compression-lz4.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-compression-snappy.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-compression-zstd.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-exactly-once.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-latency.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-no-linger.yaml", Accepted(&[KAFKA])),
    ("driver-kafka/kafka-sync.yaml", Accepted(&[KAFKA])),
    (
        "driver-kafka/kafka-throughput.yaml",
        Accepted(&[
            KAFKA,
            &[
                "commonConfig.request.timeout.ms=1200000 is above librdkafka's range for request.timeout.ms (1..900000): clamped to 900000",
                "left out, as only the Java client has them: default.api.timeout.ms",
            ],
        ]),
    ),
    (
        "driver-rabbitmq/rabbitmq.yaml",
        Accepted(&[&[
            "OpenMessaging Benchmark RabbitMQ driver file: a fanout exchange per topic, durable quorum queues",
            "transient messages",
            "creation delays and batches are not needed",
        ]]),
    ),
    (
        "driver-nats/nats.yaml",
        Accepted(&[&[
            "OpenMessaging Benchmark NATS driver file: JetStream, file storage, 3 replica(s)",
        ]]),
    ),
    (
        "driver-artemis/artemis.yaml",
        Accepted(&[&[
            "OpenMessaging Benchmark Artemis driver file",
            "brokerAddress=tcp://localhost:61616: the run uses the broker there",
        ]]),
    ),
    (
        "driver-pulsar/pulsar.yaml",
        Accepted(&[&["OpenMessaging Benchmark Pulsar driver file"]]),
    ),
    (
        "driver-pulsar/pulsar-effectively-once.yaml",
        Accepted(&[&["OpenMessaging Benchmark Pulsar driver file"]]),
    ),
    (
        "driver-redis/redis.yaml",
        Accepted(&[&[
            "OpenMessaging Benchmark Redis driver file",
            "jedisPoolMaxTotal/jedisPoolMaxIdle: ignored",
        ]]),
    ),
    (
        "driver-mqtt5/mqtt5.yaml",
        Accepted(&[&[
            "OpenMessaging Benchmark MQTT 5 driver file",
            "mqtt://localhost:1883",
        ]]),
    ),
    (
        "driver-nats-streaming/nats-streaming.yaml",
        Refused(&[
            "field `driverClass`",
            "NATS Streaming (STAN)",
            "driver-nats/nats.yaml",
            "--set driver=nats",
        ]),
    ),
];

/// The top-level `.yaml` files of OMB's driver folders (not their deploy/ templates).
fn driver_files(checkout: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for folder in FOLDERS {
        for entry in std::fs::read_dir(checkout.join(folder)).expect("an OMB driver folder") {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") {
                files.push(format!("{folder}/{name}"));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_openmessaging_benchmark_driver_file_is_read_or_refused_for_what_cannot_be_honoured() {
    let Some(checkout) = std::env::var_os(CHECKOUT_VARIABLE).map(PathBuf::from) else {
        eprintln!(
            "skipped: set {CHECKOUT_VARIABLE} to an OpenMessaging Benchmark checkout to check its driver files"
        );
        return;
    };
    let mut expected: Vec<String> = EXPECTED.iter().map(|(f, _)| f.to_string()).collect();
    expected.sort();
    assert_eq!(
        driver_files(&checkout),
        expected,
        "OMB's driver files changed: add each new one to EXPECTED with what brokerbench makes of it"
    );
    for (file, outcome) in EXPECTED {
        let output = brokerbench()
            .arg("validate")
            .arg(checkout.join(file))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        match outcome {
            Accepted(groups) => {
                assert!(output.status.success(), "{file}: {stderr}");
                let notes: Vec<&str> = stderr
                    .lines()
                    .filter_map(|l| l.strip_prefix("note: "))
                    .collect();
                let said: Vec<&str> = groups.iter().flat_map(|g| g.iter().copied()).collect();
                for wanted in &said {
                    assert!(
                        notes.iter().any(|n| n.contains(wanted)),
                        "{file}: no note with {wanted:?}:\n{stderr}"
                    );
                }
                for note in &notes {
                    let chosen = CHOSEN.iter().any(|c| note.contains(c));
                    assert!(
                        !chosen || said.iter().any(|s| note.contains(s)),
                        "{file}: a note its row does not expect: {note}"
                    );
                }
            }
            Refused(said) => {
                assert_eq!(output.status.code(), Some(2), "{file}: {stderr}");
                for wanted in *said {
                    assert!(stderr.contains(wanted), "{file}: {wanted:?} in\n{stderr}");
                }
            }
        }
    }
}
