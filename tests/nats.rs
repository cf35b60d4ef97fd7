//! Integration tests against the real managed NATS server (Debian's nats-server, started by
//! these tests if needed), the same kinds the other families have.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Runs against NATS with the bundled driver file plus `sets`.
fn nats_run(sets: &[String]) -> Run {
    nats();
    let mut args = vec!["--driver", NATS_DRIVER];
    args.extend(with_sets(sets, &[]));
    run(&args)
}

fn sets(rate: &str, seconds: u32, extra: &[&str]) -> Vec<String> {
    let mut s = short(rate, seconds);
    s.extend(extra.iter().map(|e| e.to_string()));
    s
}

#[test]
fn a_jetstream_run_is_lossless_and_the_server_counts_the_same() {
    let _turn = serial();
    let run = nats_run(&sets("5000", 2, &[]));
    let s = assert_lossless(&run);
    assert_eq!(s["driver"], "nats");
    assert!(
        s["latency"]["publish"]["count"].as_u64().unwrap() > 8000,
        "PubAcks give publish latency: {s:#}"
    );
    let broker = &s["broker_metrics"];
    assert_eq!(broker["source"], "nats", "{broker:#}");
    assert_eq!(
        broker["messages_in"], s["total"]["acknowledged"],
        "the streams stored exactly what was acknowledged: {broker:#}"
    );
    assert_broker_rate_agrees(&s, "messages_in_per_second", "acknowledged_per_s");
    let csv = run.file("broker-metrics.csv");
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains("server_messages_in_per_second"),
        "{csv}"
    );
    assert!(csv.lines().count() > 2, "{csv}");
    assert_eq!(run.manifest()["broker"]["managed"], true);
}

#[test]
fn two_subscriptions_are_two_durable_consumers_each_receiving_every_message() {
    let _turn = serial();
    let run = nats_run(&sets("2000", 2, &["subscriptions_per_topic=2"]));
    let s = assert_lossless_copies(&run, 2);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    assert!(acknowledged >= 5000, "{s:#}");
    assert_eq!(received_per_consumer(&s), vec![acknowledged; 2], "{s:#}");
}

#[test]
fn backlog_mode_stops_pulling_builds_and_drains_losslessly() {
    let _turn = serial();
    let run = nats_run(&sets(
        "5000",
        2,
        &["backlog.size=1MB", "backlog.drain_ratio=1"],
    ));
    assert_backlog(&run, 10_000, 2.0);
}

#[test]
fn partitions_memory_storage_msg_ids_and_two_members_stay_lossless_and_the_server_has_them() {
    let _turn = serial();
    // The stream is kept (delete_streams=false) so the server can say what it made: its
    // storage and duplicate window (NATS's defaults: file, 2 min), and whether the first
    // message it stored carries a Nats-Msg-Id header.
    let prefix = format!("readback{}", std::process::id());
    let stream_prefix = format!("stream_prefix={prefix}");
    let run = nats_run(&sets(
        "4000",
        2,
        &[
            "partitions_per_topic=4",
            "consumers_per_topic=2",
            "keys=random",
            "storage=memory",
            "msg_id=true",
            "duplicate_window=1m",
            "ack_policy=none",
            "delete_streams=false",
            &stream_prefix,
        ],
    ));
    let streams = take_nats_streams(&format!("{prefix}-"));
    let s = assert_lossless(&run);
    let shares = received_per_consumer(&s);
    assert_eq!(shares.len(), 2, "{s:#}");
    assert!(
        shares.iter().all(|&n| n > 0),
        "both members of the pull consumer receive: {shares:?}"
    );
    assert_eq!(streams.len(), 1, "the run's one stream");
    let (info, first, headers) = &streams[0];
    let config = &info["config"];
    assert_eq!(config["storage"], "memory", "{info:#}");
    assert_eq!(
        config["duplicate_window"].as_u64(),
        Some(Duration::from_secs(60).as_nanos() as u64),
        "{info:#}"
    );
    assert_eq!(
        info["state"]["messages"], s["total"]["acknowledged"],
        "the stream holds what was acknowledged: {info:#}"
    );
    assert!(
        headers.contains("Nats-Msg-Id: "),
        "the first stored message's headers: {headers:?} ({first:#})"
    );
}

#[test]
fn a_stream_limit_with_discard_old_counts_drops_by_policy_not_losses() {
    let _turn = serial();
    // The backlog is made by construction, not by hoping the consumer is slow: consumers stop
    // pulling until 5,000 messages wait for them, while the stream keeps only the newest 100.
    // Whatever the machine's speed, at least 4,900 acknowledged messages are discarded by the
    // stream's limit before the consumer resumes.
    let run = nats_run(&sets(
        "5000",
        2,
        &[
            "max_msgs=100",
            "message_size=100B",
            "pull_batch=10",
            "backlog.size=500KB",
            "backlog.drain_ratio=0",
            "drain_timeout=3s",
        ],
    ));
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{}", run.stderr);
    assert!(
        s["backlog"]["built_messages"].as_u64().unwrap_or(0) >= 5000,
        "the consumers waited for the backlog: {s:#}"
    );
    assert_eq!(s["integrity"]["lost"], 0, "{s:#}");
    let dropped = s["integrity"]["dropped_by_broker"].as_u64().unwrap_or(0);
    assert!(
        dropped >= 4000,
        "the stream discarded old messages while the consumers waited: {s:#}"
    );
    assert_eq!(
        s["total"]["received"].as_u64().unwrap() + dropped,
        s["total"]["acknowledged"].as_u64().unwrap(),
        "{s:#}"
    );
}

#[test]
fn a_stream_limit_with_discard_new_fails_the_refused_publishes() {
    let _turn = serial();
    let run = nats_run(&sets(
        "2000",
        2,
        &["consumers_per_topic=0", "max_msgs=100", "discard=new"],
    ));
    assert_eq!(run.code, 1, "completed with errors\nstderr: {}", run.stderr);
    let s = run.summary();
    let refused = s["errors"]["maximum_messages_exceeded"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(s["total"]["acknowledged"], 100, "{s:#}");
    assert_eq!(
        refused + 100,
        s["total"]["sent"].as_u64().unwrap(),
        "every publish beyond 100 refused: {s:#}"
    );
}

#[test]
fn an_unreachable_nats_exits_3_fast() {
    let _turn = serial();
    let started = Instant::now();
    let run = run(&[
        "--driver",
        NATS_DRIVER,
        "--set",
        "servers=nats://bench:hunter2@127.0.0.1:1",
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        run.stderr.contains("127.0.0.1:1") && run.stderr.contains("brokerbench broker up nats"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
}

#[test]
fn bad_driver_fields_exit_2_naming_the_field() {
    for (set, says) in [
        ("ack_polcy=none", "did you mean `ack_policy`?"),
        ("storage=disk", "field `storage`"),
        ("discard=new", "field `discard`"),
        ("stream_prefix=a.b", "field `stream_prefix`"),
        ("bootstrap_servers=x:1", "field of the kafka driver"),
    ] {
        let run = run(&["--driver", NATS_DRIVER, "--set", set]);
        assert_eq!(run.code, 2, "{set}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{set}: {}", run.stderr);
        assert!(
            run.stderr.contains("nats.yaml") || run.stderr.contains(&format!("--set {set}")),
            "{set}: names the file or the assignment: {}",
            run.stderr
        );
    }
}

#[test]
fn an_openmessaging_benchmark_nats_driver_file_runs_once_its_replicas_fit_the_server() {
    let _turn = serial();
    let address = nats();
    let dir = tempfile::tempdir().unwrap();
    // The shape of OMB's driver-nats file: three replicas, which one server cannot hold.
    let driver = write(
        dir.path(),
        "nats-omb.yaml",
        &format!(
            "name: NATS\ndriverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver\nnatsHostUrl: nats://{address}\nreplicationFactor: 3\n"
        ),
    );
    let driver = driver.to_str().unwrap();
    let refused = run(&["--driver", driver, "--set", "duration=1s"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not in a cluster") && refused.stderr.contains("--set replicas=1"),
        "{}",
        refused.stderr
    );
    let mut args = vec!["--driver", driver, "--set", "replicas=1"];
    let sets = short("1000", 1);
    args.extend(with_sets(&sets, &[]));
    assert_lossless(&run(&args));
}
