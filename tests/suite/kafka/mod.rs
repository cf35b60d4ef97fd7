//! Kafka against the real managed broker (KRaft, its jars from Maven Central): the
//! conformance suite, and what is Kafka's own: its clients' settings, its faults, its
//! metrics, OMB's max-rate workload files, TLS and SASL, shards.

mod clients;
mod faults;
mod metrics_endpoint;
mod monitoring;
mod omb;
mod scale;
mod shards;
mod tls;

use std::time::Duration;

use crate::common::*;
use crate::conformance::*;

pub static SUBJECT: Subject = Subject {
    family: "kafka",
    // The broker's MessagesInPerSec (its JMX exporter's counter, read over the run) within 1%
    // of what was acknowledged; the kept topic's high watermark is exactly that.
    counted: Counted {
        seconds: 3,
        sets: &["delete_topics=false", "rate=10000"],
        prefix: "topic_prefix={prefix}",
        exact: false,
        publish_slack_us: None,
        stored: the_topic_holds_every_message,
        leftovers: Some(topic_names),
    },
    topology: Topology {
        sets: PARTITIONED,
        stored: None,
    },
    omb: omb_driver_files,
    unreachable: &[
        "bootstrap_servers=127.0.0.1:1",
        "common_config.sasl.password=hunter2",
    ],
    bad_fields: &[
        ("replication_factr=1", "did you mean `replication_factor`?"),
        ("replication_factor=0", "field `replication_factor`"),
        ("producer_clients=per_thred", "producer_clients"),
        ("uri=amqp://h:1", "field of the rabbitmq driver"),
    ],
    // acks=all and an idempotent producer: nothing acknowledged is lost, and its retries
    // acknowledge every message once. The managed Kafka answers again 17 s after a SIGKILL on
    // an idle host here (the JVM's start, the log's recovery).
    kill: Kill {
        sets: &[
            "producer_config.acks=all",
            "producer_config.enable.idempotence=true",
        ],
        prepare: None,
        may_lose: MayLose::Nothing,
        check: Some(every_message_acknowledged_once),
    },
    tls: Some(Tls {
        secret: Secret::Password,
        shown: "\"sasl.password\": \"***\"",
        wrong_secret: &[
            "refused the credentials",
            "brokerbench",
            "SCRAM-SHA-512",
            "sasl.password",
        ],
        untrusted: &["certificate verify failed", "ssl.ca.location"],
    }),
    // The broker holds each fetch until 100 MB wait or 30 s pass, so the consumer receives
    // nothing in this run, and the run's own topic holds every acknowledged message beyond
    // its position when the drain ends. (OMB's max-rate workload once: 1.47M msg/s produced,
    // 225K consumed, reported as millions lost.)
    unconsumed: Some(Unconsumed {
        rate: "5000",
        sets: &[
            "unique_topics=true",
            "consumer_config.fetch.min.bytes=100000000",
            "consumer_config.fetch.wait.max.ms=30000",
        ],
        evidence: "high watermark",
        exits_clean: true,
        check: Some(the_consumer_received_nothing),
    }),
    dropped: None,
};

conformance!(super::SUBJECT, tls, unconsumed);

/// Starts the managed Kafka once for the suite, with its TLS and SASL listeners on (`broker
/// up kafka --tls`: the plain listener is unchanged); its client port.
fn kafka() -> u16 {
    family_port("kafka")
}

/// The managed Kafka's topics whose names start with `prefix`.
fn topic_names(prefix: &str) -> Vec<String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", format!("127.0.0.1:{}", kafka()))
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(30))
        .unwrap();
    let mut names: Vec<String> = metadata
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// The broker counted the messages in within 1% (its exporter's counter, read before and
/// after the run) and at about the run's rate; the kept topic's high watermarks add up to
/// exactly the whole run's acknowledged messages, and the topic is deleted.
fn the_topic_holds_every_message(prefix: &str, run: &Run, s: &serde_json::Value) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let m = &s["broker_metrics"];
    let broker = m["messages_in"]
        .as_f64()
        .expect("the broker's count over the run");
    let acknowledged = s["total"]["acknowledged"].as_f64().unwrap();
    assert!(acknowledged >= 25_000.0, "{s:#}");
    assert!(
        (broker - acknowledged).abs() / acknowledged < 0.01,
        "MessagesInPerSec counted {broker}, brokerbench acknowledged {acknowledged}"
    );
    assert!(run.file("broker-metrics.csv").lines().count() >= 4);
    let topics = topic_names(prefix);
    assert_eq!(topics.len(), 1, "{topics:?}");
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", format!("127.0.0.1:{}", kafka()))
        .create()
        .unwrap();
    let (low, high) = consumer
        .fetch_watermarks(&topics[0], 0, Duration::from_secs(30))
        .unwrap();
    let whole_run = s["integrity"]["whole_run"]["acknowledged"]
        .as_i64()
        .or_else(|| s["total"]["acknowledged"].as_i64());
    assert_eq!(Some(high - low), whole_run, "{s:#}");
    delete_topics(&topics);
}

/// Deletes `topics` from the managed Kafka.
fn delete_topics(topics: &[String]) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", format!("127.0.0.1:{}", kafka()))
        .create()
        .unwrap();
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let deleted = futures_executor::block_on(admin.delete_topics(&names, &AdminOptions::new()));
    for result in deleted.expect("the delete request") {
        result.unwrap_or_else(|(topic, e)| panic!("deleting {topic}: {e}"));
    }
}

/// The broker held every fetch: nothing was received, all of it unconsumed.
fn the_consumer_received_nothing(s: &serde_json::Value) {
    assert_eq!(s["total"]["received"], 0, "{s:#}");
    assert!(
        s["total"]["acknowledged"].as_u64().unwrap() >= 10_000,
        "{s:#}"
    );
}

/// Idempotent retries: every message sent is acknowledged once; and the broker's exporter,
/// started again with the broker, answered after the restart (its port had to be free again):
/// the count over the run needs its reading after the drain.
fn every_message_acknowledged_once(s: &serde_json::Value) {
    let total = &s["total"];
    assert_eq!(total["acknowledged"], total["sent"], "{s:#}");
    let metrics = &s["broker_metrics"];
    assert!(metrics["messages_in"].is_number(), "{metrics:#}");
}

/// OMB's kafka-big-throughput driver file, with one replica (OMB's has three).
const OMB_BIG_THROUGHPUT: &str = "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\nreplicationFactor: 1\ntopicConfig: |\n  min.insync.replicas=1\ncommonConfig: |\n  default.api.timeout.ms=1200000\n  request.timeout.ms=1200000\nproducerConfig: |\n  acks=all\n  linger.ms=100\n  batch.size=1048576\n  max.request.size=4194304\nconsumerConfig: |\n  auto.offset.reset=earliest\n  enable.auto.commit=false\n  max.partition.fetch.bytes=10485760\n";

/// OMB's Kafka driver files: the settings of its kafka-big-batches and kafka-throughput
/// files (a Java property librdkafka names otherwise, a timeout past librdkafka's range), and
/// its latency file (three replicas and two in sync, which a one-broker cluster cannot give,
/// so it is refused with the fix, and runs with OMB's own name for the replication factor).
/// No bootstrap.servers: the managed local Kafka.
fn omb_driver_files(_port: u16) -> Vec<OmbFile> {
    let latency = "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\nreplicationFactor: 3\ntopicConfig: |\n  min.insync.replicas=2\ncommonConfig: |\n  client.id=omb-test\nproducerConfig: |\n  acks=all\n  linger.ms=1\n  batch.size=131072\n  key.serializer=org.apache.kafka.common.serialization.StringSerializer\nconsumerConfig: |\n  auto.offset.reset=earliest\n  enable.auto.commit=false\n  max.partition.fetch.bytes=10485760\n";
    vec![
        OmbFile {
            name: "kafka-big-throughput.yaml",
            text: OMB_BIG_THROUGHPUT.into(),
            sets: Vec::new(),
            note: "max.request.size=4194304 is the Java client's name for the largest produce request: passed to librdkafka as message.max.bytes",
            expect: Expect::Lossless,
            check: Some(java_settings_in_librdkafkas_terms),
        },
        OmbFile {
            name: "kafka-latency.yaml",
            text: latency.into(),
            sets: Vec::new(),
            note: "",
            expect: Expect::RefusedBeforeAnything(&[
                "replication_factor 3 needs 3 brokers",
                "has 1",
                "NOT_ENOUGH_REPLICAS",
                "--set replication_factor=1 --set topic_config.min.insync.replicas=1",
            ]),
            check: None,
        },
        OmbFile {
            name: "kafka-latency.yaml",
            text: latency.into(),
            sets: vec![
                "replicationFactor=1".into(),
                "topic_config.min.insync.replicas=1".into(),
            ],
            note: "OpenMessaging Benchmark Kafka driver file",
            expect: Expect::Lossless,
            check: Some(java_properties_dropped_the_rest_kept),
        },
    ]
}

/// max.request.size passed as message.max.bytes, the timeout clamped, both said.
fn java_settings_in_librdkafkas_terms(run: &Run, _s: &serde_json::Value) {
    let manifest = run.manifest();
    let d = &manifest["driver"];
    assert_eq!(
        d["producer_config"]["message.max.bytes"], "4194304",
        "{d:#}"
    );
    assert!(d["producer_config"].get("max.request.size").is_none());
    assert_eq!(d["common_config"]["request.timeout.ms"], "900000");
    let notes = manifest["input_notes"].to_string();
    let clamped = "request.timeout.ms=1200000 is above librdkafka's range for request.timeout.ms (1..900000): clamped to 900000";
    assert!(notes.contains(clamped), "{notes}");
}

/// The replication factor and the settings librdkafka knows kept; Java serializers dropped.
fn java_properties_dropped_the_rest_kept(run: &Run, _s: &serde_json::Value) {
    let d = &run.manifest()["driver"];
    assert_eq!(d["replication_factor"], 1, "{d:#}");
    assert_eq!(d["producer_config"]["acks"], "all");
    assert_eq!(d["common_config"]["client.id"], "omb-test");
    assert_eq!(
        d["consumer_config"]["max.partition.fetch.bytes"],
        "10485760"
    );
    assert!(
        d["producer_config"].get("key.serializer").is_none(),
        "{d:#}"
    );
}
