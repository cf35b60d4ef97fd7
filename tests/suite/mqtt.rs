//! MQTT against the real managed broker (Debian's mosquitto): the conformance suite, and what
//! is MQTT's own. The broker's own figures are read with Debian's mosquitto_sub.

use std::time::Duration;

use crate::common::*;
use crate::conformance::*;

/// The bundled MQTT driver file.
const MQTT_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers/mqtt.yaml");

pub static SUBJECT: Subject = Subject {
    family: "mqtt",
    // mosquitto keeps no objects for a run: its count is $SYS's, and nothing is left behind.
    // It publishes its figures every 2 s: a warm-up and a window of two updates and more
    // each, so that every rate of the window is the run's.
    counted: Counted {
        seconds: 4,
        sets: &["warmup=3s"],
        prefix: "topic_prefix={prefix}",
        exact: true,
        publish_slack_us: Some(300),
        stored: every_client_counted,
        leftovers: None,
    },
    topology: Topology {
        sets: PARTITIONED,
        stored: None,
    },
    omb: omb_driver_files,
    unreachable: &["mqtt_url=mqtt://bench:hunter2@127.0.0.1:1"],
    bad_fields: &[
        ("qos=3", "field `qos`: must be 0, 1 or 2"),
        ("qso=1", "did you mean `qos`?"),
        ("protocol=4.0", "write 5 or \"3.1.1\""),
        ("topic_prefix=a/#", "field `topic_prefix`"),
        ("max_outstanding=0", "field `max_outstanding`"),
        ("keep_alive_seconds=0", "field `keep_alive_seconds`"),
        ("mqtt_url=mqtt://:pw@h:1", "a password needs its user name"),
        ("mqtt_url=http://h:1", "mqtt://host:port"),
        (
            "broker_metrics.url=http://127.0.0.1:9/metrics",
            "field `broker_metrics.url`: 'http://127.0.0.1:9/metrics': the URL must start with mqtt://",
        ),
    ],
    // mosquitto keeps queued messages in memory between saves of its persistence file, and its
    // clean sessions end with it: what it had acknowledged and not delivered when killed is
    // lost, and so is what it acknowledges after the restart before the consumer has
    // subscribed again (1,517 of 1,980 in the first second after the restart once, with both
    // cores busy; a few dozen on an idle host).
    kill: Kill::with(&[], MayLose::UntilTheConsumersAreBack),
    tls: Some(Tls {
        secret: Secret::InUrl("mqtt_url: mqtts://"),
        shown: "mqtts://brokerbench:***@",
        wrong_secret: &[
            "refused the credentials",
            "CONNACK code",
            "user 'brokerbench'",
            "mqtt_url",
        ],
        untrusted: &["UnknownIssuer", "ca_file"],
    }),
    // Four producers at max rate to a consumer that takes one message per round trip (MQTT
    // 5's receive maximum of 1): it holds hundreds of thousands behind when the 1-s drain ends,
    // still in mosquitto's store (a hand run: 567,142 acknowledged, 71,752 received, 495,390
    // unconsumed, none lost; counted as lost before).
    unconsumed: Some(Unconsumed {
        rate: "max",
        sets: &["producers_per_topic=4", "receive_maximum=1", "qos=1"],
        evidence: "$SYS/broker/store/messages/count",
        exits_clean: true,
        check: None,
    }),
    // The consumers stop reading until 10,000 messages wait for them, built at 2,000 msg/s
    // (5 s), while every message expires after 1 s: most of the backlog is discarded.
    dropped: Some(Dropped {
        rate: "2000",
        seconds: 2,
        limit: &[
            "message_expiry_seconds=1",
        ],
        backlog: "1000KB",
        note: Some("message expiry"),
    }),
};

conformance!(super::SUBJECT, tls, unconsumed, dropped);

/// Starts the managed broker once for the suite, with TLS and a user (`broker up mqtt --tls`:
/// the plain listener stays anonymous, so every other test runs against it unchanged);
/// returns its port.
fn mqtt() -> u16 {
    family_port("mqtt")
}

/// The broker's `$SYS` value at `topic` (below `$SYS/broker/`), read with mosquitto_sub after
/// the broker's next update (it publishes every 2 s, and only the values that changed: the
/// retained value, read once an update has passed, is the value now).
fn sys(topic: &str) -> String {
    std::thread::sleep(Duration::from_millis(2500));
    let output = std::process::Command::new("mosquitto_sub")
        .args(["-p", &mqtt().to_string(), "-C", "1", "-W", "5"])
        .args(["-t", &format!("$SYS/broker/{topic}")])
        .output()
        .expect("running mosquitto_sub (Debian's mosquitto-clients)");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// $SYS counted the producer and the consumer; the manifest names the broker and protocol.
fn every_client_counted(_prefix: &str, run: &Run, s: &serde_json::Value) {
    let broker = &s["broker_metrics"];
    assert!(
        broker["maxima"]["connected_clients"].as_f64().unwrap() >= 2.0,
        "{broker:#}"
    );
    let version = run.broker_version();
    assert!(
        version.starts_with("2.") && version.ends_with(" (mosquitto, MQTT 5)"),
        "{version}"
    );
}

/// OMB's driver-mqtt/mqtt.yaml (Paho, 3.1.1: QoS 0 sends, QoS 1 subscriptions, persistent
/// sessions) and driver-mqtt5's file, with the managed broker's port (1883 unless moved).
fn omb_driver_files(port: u16) -> Vec<OmbFile> {
    let members = vec!["consumers_per_topic=2".to_string()];
    vec![
        OmbFile {
            name: "mqtt.yaml",
            text: format!("name: MQTT\ndriverClass: io.openmessaging.benchmark.driver.mqtt.MQTTBenchmarkDriver\n\n# MQTT client-specific configuration\n\nbrokerAddr: tcp://127.0.0.1:{port}\nuserName: 00000000000000000000000002\npassword: 00000000000000000000000002\ncleanSession: false\nkeepAliveInterval: 6000000\nmaxInflight: 65535\nclientIdPrefix: GID-MQTT@@@Client\npubQos: 0\nsubQos: 1\n"),
            sets: members.clone(),
            note: "MQTT 3.1.1 driver file (Paho)",
            expect: Expect::ReceivedAllSent,
            check: None,
        },
        OmbFile {
            name: "mqtt5.yaml",
            text: format!("name: MQTT5\ndriverClass: io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver\nclient:\n  serverUri: tcp://localhost:{port}\n  username: ''\n  password: ''\n  qos: 1\n  topicPrefix: benchmark\nconsumer:\n  cleanSession: true\n  sessionExpiryInterval: 259200\n  receiveMaximum: 256\n"),
            sets: members,
            note: "MQTT 5 driver file",
            expect: Expect::Lossless,
            check: None,
        },
    ]
}

#[test]
fn qos_0_qos_2_and_mqtt_3_1_1_each_deliver_every_message_once() {
    let _turn = serial();
    let s = assert_received_all_sent(&family_run(
        "mqtt",
        MQTT_DRIVER,
        &short_with("2000", 2, &["qos=0"]),
    ));
    assert_eq!(
        s["total"]["acknowledged"], 0,
        "QoS 0 confirms nothing: {s:#}"
    );
    let s = assert_lossless(&family_run(
        "mqtt",
        MQTT_DRIVER,
        &short_with("2000", 2, &["qos=2"]),
    ));
    let notes = s["notes"].to_string();
    assert!(notes.contains("PUBCOMP"), "{notes}");
    let run = family_run(
        "mqtt",
        MQTT_DRIVER,
        &short_with("2000", 2, &["protocol=3.1.1", "subscribe_qos=2"]),
    );
    assert_lossless(&run);
    let version = run.broker_version();
    assert!(version.contains("(mosquitto, MQTT 3.1.1)"), "{version}");
}

#[test]
fn message_expiry_is_mqtt_5s_and_refused_on_3_1_1() {
    let run = run(&[
        "--driver",
        MQTT_DRIVER,
        "--set",
        "protocol=3.1.1",
        "--set",
        "message_expiry_seconds=5",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("field `message_expiry_seconds`: message expiry is MQTT 5"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_persistent_sessions_of_omb_s_paho_file_end_with_the_run() {
    let _turn = serial();
    let port = mqtt();
    let dir = tempfile::tempdir().unwrap();
    let file = &omb_driver_files(port)[0];
    let path = write(dir.path(), file.name, &file.text);
    let sets = short_with("1000", 1, &["consumers_per_topic=2"]);
    let omb = run(&with_sets(&sets, &["--driver", path.to_str().unwrap()]));
    assert_received_all_sent(&omb);
    // A session left behind stays counted as disconnected until it expires: read after up to
    // four of the broker's 2-s updates, for a host that is late.
    let mut disconnected = String::new();
    for _ in 0..4 {
        disconnected = sys("clients/disconnected");
        if disconnected == "0" {
            break;
        }
    }
    assert_eq!(disconnected, "0");
}

#[test]
fn the_brokers_password_file_holds_a_hash_not_the_password() {
    let _turn = serial();
    mqtt();
    let (_, password) = checks::tls_driver("mqtt", &Secret::InUrl("mqtt_url: mqtts://"));
    let hashed =
        std::fs::read_to_string(brokerbench_brokers::home().join("mqtt/tls/mosquitto-passwords"))
            .unwrap();
    assert!(hashed.starts_with("brokerbench:$") && !hashed.contains(&password));
}
