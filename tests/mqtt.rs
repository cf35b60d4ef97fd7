//! Integration tests against the real managed MQTT broker (Debian's mosquitto, started once by
//! this binary), the same kinds the other families have; the broker's own figures are read
//! with Debian's mosquitto_sub.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

/// The bundled MQTT driver file.
const MQTT_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers/mqtt.yaml");

/// Starts the managed broker once per test binary (idempotent), with TLS and a user (`broker
/// up mqtt --tls`: the plain listener stays anonymous, so every other test runs against it
/// unchanged); returns its port.
fn mqtt() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let text = up_with_tls("mqtt");
        assert!(text.contains("TLS:  mqtts://127.0.0.1:"), "{text}");
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("127.0.0.1:"))
            .and_then(|p| p.parse().ok())
            .expect("broker up prints the address")
    })
}

fn mqtt_run(sets: &[String]) -> Run {
    mqtt();
    run_driver(MQTT_DRIVER, sets)
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

/// A complete run that received every message sent (QoS 0: nothing is acknowledged).
fn assert_received_all_sent(run: &Run) -> serde_json::Value {
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let s = run.summary();
    assert!(s["total"]["sent"].as_u64().unwrap() > 0, "{s:#}");
    assert_eq!(s["total"]["sent"], s["total"]["received"], "{s:#}");
    for field in ["lost", "duplicated", "out_of_order"] {
        assert_eq!(s["integrity"][field], 0, "{field}: {s:#}");
    }
    s
}

#[test]
fn a_qos_1_run_is_lossless_and_the_broker_counted_every_publish() {
    let _turn = serial();
    // mosquitto publishes its figures every 2 s: a warm-up and a window of two updates and more
    // each, so that every rate of the window is the run's.
    let run = mqtt_run(&short_with("2000", 4, &["warmup=3s"]));
    let s = assert_lossless(&run);
    assert_publish_not_inflated_by_the_gap(&s, 300);
    assert_eq!(s["driver"], "mqtt");
    assert!(
        s["latency"]["publish"]["count"].as_u64().unwrap() > 7000,
        "PUBACKs give publish latency: {s:#}"
    );
    // The broker's own count ($SYS/broker/publish/messages/received, from an update after the
    // run) is exactly what was acknowledged, and its rate over the window agrees.
    let broker = &s["broker_metrics"];
    assert_eq!(broker["source"], "mqtt", "{broker:#}");
    assert_eq!(
        broker["messages_in"], s["total"]["acknowledged"],
        "{broker:#}"
    );
    assert_broker_rate_agrees(&run, &s, "messages_in_per_second", "acknowledged_per_s");
    assert!(
        broker["maxima"]["connected_clients"].as_f64().unwrap() >= 2.0,
        "{broker:#}"
    );
    let manifest = run.manifest();
    assert_eq!(manifest["broker"]["managed"], true);
    let version = manifest["broker"]["version"].as_str().unwrap();
    assert!(
        version.starts_with("2.") && version.ends_with(" (mosquitto, MQTT 5)"),
        "{version}"
    );
}

#[test]
fn qos_0_qos_2_and_mqtt_3_1_1_each_deliver_every_message_once() {
    let _turn = serial();
    let s = assert_received_all_sent(&mqtt_run(&short_with("2000", 2, &["qos=0"])));
    assert_eq!(
        s["total"]["acknowledged"], 0,
        "QoS 0 confirms nothing: {s:#}"
    );
    let s = assert_lossless(&mqtt_run(&short_with("2000", 2, &["qos=2"])));
    let notes = s["notes"].to_string();
    assert!(notes.contains("PUBCOMP"), "{notes}");
    let run = mqtt_run(&short_with(
        "2000",
        2,
        &["protocol=3.1.1", "subscribe_qos=2"],
    ));
    assert_lossless(&run);
    let version = run.manifest()["broker"]["version"].to_string();
    assert!(version.contains("(mosquitto, MQTT 3.1.1)"), "{version}");
}

#[test]
fn partitions_and_two_shared_subscriptions_of_two_members_each_receive_every_message_once() {
    let _turn = serial();
    let run = mqtt_run(&short_with(
        "2000",
        2,
        &[
            "partitions_per_topic=3",
            "keys=round-robin",
            "subscriptions_per_topic=2",
            "consumers_per_topic=2",
        ],
    ));
    let s = assert_lossless_copies(&run, 2);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    let each = received_per_consumer(&s);
    assert_eq!(each.len(), 4, "{s:#}");
    assert_eq!(each.iter().sum::<u64>(), 2 * acknowledged, "{s:#}");
    assert!(
        each.iter().all(|&n| n > 0),
        "the broker dealt every member a share: {each:?}"
    );
}

#[test]
fn messages_that_expire_while_the_consumers_wait_are_dropped_by_policy_not_lost() {
    let _turn = serial();
    // The consumers stop reading until 10,000 messages wait for them, built at 2,000 msg/s
    // (5 s), while every message expires after 1 s: most of the backlog is discarded by the
    // broker, whatever the machine's speed (at least 5,000 asserted).
    let run = mqtt_run(&short_with(
        "2000",
        2,
        &[
            "message_expiry_seconds=1",
            "message_size=100B",
            "backlog.size=1000KB",
            "backlog.drain_ratio=0",
            "drain_timeout=3s",
        ],
    ));
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{}", run.stderr);
    assert_eq!(s["integrity"]["lost"], 0, "{s:#}");
    let dropped = s["integrity"]["dropped_by_broker"].as_u64().unwrap_or(0);
    assert!(
        dropped >= 5000,
        "the broker discarded expired messages: {s:#}"
    );
    assert_eq!(
        s["total"]["received"].as_u64().unwrap() + dropped,
        s["total"]["acknowledged"].as_u64().unwrap(),
        "{s:#}"
    );
    let notes = s["notes"].to_string();
    assert!(notes.contains("message expiry"), "{notes}");
}

#[test]
fn an_unreachable_broker_exits_3_fast_naming_how_to_start_it() {
    let _turn = serial();
    let started = Instant::now();
    let run = run(&[
        "--driver",
        MQTT_DRIVER,
        "--set",
        "mqtt_url=mqtt://bench:hunter2@127.0.0.1:1",
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        run.stderr.contains("127.0.0.1:1") && run.stderr.contains("brokerbench broker up mqtt"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
}

#[test]
fn bad_driver_fields_exit_2_naming_the_field() {
    for (set, says) in [
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
    ] {
        let run = run(&["--driver", MQTT_DRIVER, "--set", set]);
        assert_eq!(run.code, 2, "{set}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{set}: {}", run.stderr);
    }
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
fn openmessaging_benchmark_mqtt_driver_files_run_unchanged_and_leave_no_session() {
    let _turn = serial();
    let port = mqtt();
    let dir = tempfile::tempdir().unwrap();
    // OMB's driver-mqtt/mqtt.yaml (Paho, 3.1.1: QoS 0 sends, QoS 1 subscriptions, persistent
    // sessions) and driver-mqtt5's file, with the managed broker's port (1883 unless moved).
    let v3 = write(
        dir.path(),
        "mqtt.yaml",
        &format!("name: MQTT\ndriverClass: io.openmessaging.benchmark.driver.mqtt.MQTTBenchmarkDriver\n\n# MQTT client-specific configuration\n\nbrokerAddr: tcp://127.0.0.1:{port}\nuserName: 00000000000000000000000002\npassword: 00000000000000000000000002\ncleanSession: false\nkeepAliveInterval: 6000000\nmaxInflight: 65535\nclientIdPrefix: GID-MQTT@@@Client\npubQos: 0\nsubQos: 1\n"),
    );
    let v5 = write(
        dir.path(),
        "mqtt5.yaml",
        &format!("name: MQTT5\ndriverClass: io.openmessaging.benchmark.driver.mqtt5.MqttBenchmarkDriver\nclient:\n  serverUri: tcp://localhost:{port}\n  username: ''\n  password: ''\n  qos: 1\n  topicPrefix: benchmark\nconsumer:\n  cleanSession: true\n  sessionExpiryInterval: 259200\n  receiveMaximum: 256\n"),
    );
    let sets = short_with("1000", 1, &["consumers_per_topic=2"]);
    let mut args = vec!["--driver", v3.to_str().unwrap()];
    args.extend(with_sets(&sets, &[]));
    let omb = run(&args);
    assert_received_all_sent(&omb);
    let notes = omb.manifest()["input_notes"].to_string();
    assert!(notes.contains("MQTT 3.1.1 driver file (Paho)"), "{notes}");
    // The run's persistent sessions ended with it (a session left behind stays counted as
    // disconnected until it expires: read after up to four updates, for a host that is late).
    let mut disconnected = String::new();
    for _ in 0..4 {
        disconnected = sys("clients/disconnected");
        if disconnected == "0" {
            break;
        }
    }
    assert_eq!(disconnected, "0");
    let mut args = vec!["--driver", v5.to_str().unwrap()];
    args.extend(with_sets(&sets, &[]));
    let omb = run(&args);
    assert_lossless(&omb);
    let notes = omb.manifest()["input_notes"].to_string();
    assert!(notes.contains("MQTT 5 driver file"), "{notes}");
}

#[test]
fn a_killed_broker_started_again_gets_its_clients_back() {
    let _turn = serial();
    mqtt();
    let mut args = vec!["--driver", MQTT_DRIVER];
    let sets = short("1000", 10);
    args.extend(with_sets(
        &sets,
        &["--fault", "at=2s,action=kill,node=1,restart_after=1s"],
    ));
    let run = run(&args);
    // mosquitto keeps queued messages in memory between saves of its persistence file: what
    // it had acknowledged and not delivered when killed is lost; the clients come back.
    assert!(run.code <= 1, "{}", run.stderr);
    let s = run.summary();
    let kill = &s["faults"][0];
    assert!(kill["restarted_pid"].as_u64().is_some(), "{kill:#}");
    assert!(s["integrity"]["lost"].as_u64().unwrap() < 1000, "{s:#}");
    let measured = measured_columns(&run, &["second", "acknowledged", "received"]);
    assert!(measured.len() >= 2, "{measured:?}");
    for cells in &measured[measured.len() - 2..] {
        let count = |c: usize| cells[c].parse::<u64>().unwrap();
        assert!(
            count(1) > 500 && count(2) > 500,
            "the clients came back: {measured:?}"
        );
    }
    let status = brokerbench()
        .args(["broker", "status", "mqtt"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
}

/// The driver file `broker status mqtt --driver-file` prints for the TLS listener, and the
/// password it holds.
fn tls_driver() -> (String, String) {
    mqtt();
    tls_driver_file("mqtt", "mqtt_url: mqtts://")
}

#[test]
fn a_run_over_tls_as_the_user_is_clean_and_keeps_secrets() {
    let _turn = serial();
    let (driver, password) = tls_driver();
    assert_tls_run_keeps_secrets("mqtt", &driver, &password, "mqtts://brokerbench:***@");
    // The broker's password file holds a hash, not the password.
    let hashed =
        std::fs::read_to_string(brokerbench_brokers::home().join("mqtt/tls/mosquitto-passwords"))
            .unwrap();
    assert!(hashed.starts_with("brokerbench:$") && !hashed.contains(&password));
}

#[test]
fn a_wrong_password_or_an_untrusted_certificate_is_refused_at_once_naming_what_to_fix() {
    let _turn = serial();
    let (driver, password) = tls_driver();
    let says = [
        "refused the credentials",
        "CONNACK code",
        "user 'brokerbench'",
        "mqtt_url",
    ];
    assert_tls_refusals("mqtt", &driver, &password, &says);
}
