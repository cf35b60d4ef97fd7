//! Integration tests against the real managed RabbitMQ (started by these tests if needed).

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Runs against RabbitMQ with the bundled driver file plus `sets`.
fn rabbit_run(sets: &[String]) -> Run {
    rabbitmq();
    run_driver(RABBITMQ_DRIVER, sets)
}

#[test]
fn direct_exchange_with_confirms_and_manual_acks_is_lossless() {
    let _turn = serial();
    let run = rabbit_run(&short_with("2000", 2, &[]));
    let s = assert_lossless(&run);
    assert_eq!(s["driver"], "rabbitmq");
    assert!(
        s["latency"]["publish"]["count"].as_u64().unwrap() > 3000,
        "confirms give publish latency"
    );
    assert_eq!(
        s["broker_metrics"]["source"], "rabbitmq",
        "{:#}",
        s["broker_metrics"]
    );
    assert_broker_rate_agrees(&run, &s, "messages_in_per_second", "acknowledged_per_s");
    assert_broker_rate_agrees(
        &run,
        &s,
        "messages_confirmed_per_second",
        "acknowledged_per_s",
    );
    assert_broker_rate_agrees(&run, &s, "messages_delivered_per_second", "received_per_s");
}

#[test]
fn backlog_mode_stops_taking_deliveries_builds_and_drains_losslessly() {
    let _turn = serial();
    // 1 MB of 100-byte messages is 10,000: 2 s at 5,000 msg/s; the queue holds them
    // (prefetch bounds what the paused consumer's connection takes).
    let run = rabbit_run(&short_with(
        "5000",
        2,
        &["backlog.size=1MB", "backlog.drain_ratio=1"],
    ));
    assert_backlog(&run, 10_000, 2.0);
}

#[test]
fn messages_a_queue_still_holds_when_the_drain_ends_are_unconsumed_not_lost() {
    let _turn = serial();
    // The backlog by the consumer's shape: it takes one message per round trip through the
    // broker (prefetch 1, an acknowledgement each) while the closed-loop producer keeps as many
    // publishes in flight as the broker confirms; after a 1 s drain the queue usually still
    // holds most of what was acknowledged (measured: 51,497 acknowledged, 14,985 received).
    // Not always: RabbitMQ's flow control can hold the producer to the consumer's pace (2 of
    // 11 classic runs on a busy host left no backlog), so a run without one is run again: the
    // premise, not the claim, is retried. What is checked is the count, exact whatever the
    // backlog: every message acknowledged and not received is unconsumed, none lost. Not the
    // exit code: confirms still outstanding when the drain ends are counted unacknowledged
    // (809 once in 11 runs), which is the truth about such a run, and not this test's matter.
    // A quorum queue keeps a cancelled consumer's checked-out messages unsent: they count too.
    for queue in ["classic", "quorum"] {
        let s = run_leaving_a_backlog(queue);
        let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
        let received = s["total"]["received"].as_u64().unwrap();
        let integrity = &s["integrity"];
        assert_eq!(s["status"], "complete", "{queue}: {s:#}");
        assert_eq!(s["errors"], serde_json::json!({}), "{queue}: {s:#}");
        assert_eq!(integrity["lost"], 0, "{queue}: {s:#}");
        assert_eq!(integrity["duplicated"], 0, "{queue}: {s:#}");
        assert_eq!(
            integrity["unconsumed"],
            acknowledged - received,
            "{queue}: {s:#}"
        );
        assert!(
            integrity["unconsumed_evidence"]
                .as_str()
                .is_some_and(|e| e.contains("queue.declare passive")),
            "{queue}: {s:#}"
        );
        assert!(
            s["notes"]
                .to_string()
                .contains("not consumed yet, not lost"),
            "{queue}: {s:#}"
        );
    }
}

/// The summary of a max-rate run with a prefetch-1 consumer and a 1 s drain that left
/// messages in the queue (up to three tries).
fn run_leaving_a_backlog(queue: &str) -> serde_json::Value {
    let kind = format!("queue.type={queue}");
    let extra = [
        "drain_timeout=1s",
        "prefetch=1",
        "ack.multiple_every=1",
        &kind,
    ];
    let mut last = serde_json::Value::Null;
    for _ in 0..3 {
        let run = rabbit_run(&short_with("max", 2, &extra));
        last = run.summary();
        if last["total"]["received"].as_u64() < last["total"]["acknowledged"].as_u64() {
            return last;
        }
    }
    panic!("{queue}: no backlog in three runs: {last:#}");
}

#[test]
fn fanout_queues_each_receive_every_message() {
    let _turn = serial();
    let run = rabbit_run(&short_with(
        "1000",
        2,
        &["exchange.type=fanout", "queues_per_topic=3"],
    ));
    let s = assert_lossless_copies(&run, 3);
    let shares = received_per_consumer(&s);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    assert_eq!(
        shares,
        vec![acknowledged; 3],
        "each of 3 queues got every message"
    );
}

#[test]
fn workload_subscriptions_are_queues_and_a_conflicting_queue_count_exits_2() {
    let _turn = serial();
    let run = rabbit_run(&short_with("1000", 2, &["subscriptions_per_topic=2"]));
    assert_lossless_copies(&run, 2);
    let run = rabbit_run(&short_with(
        "1000",
        1,
        &["subscriptions_per_topic=2", "queues_per_topic=3"],
    ));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("subscriptions_per_topic: 2")
            && run.stderr.contains("queues_per_topic: 3"),
        "{}",
        run.stderr
    );
}

#[test]
fn without_confirms_only_sent_is_counted_and_the_summary_says_so() {
    let _turn = serial();
    let run = rabbit_run(&short_with("2000", 2, &["confirms.enabled=false"]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = run.summary();
    assert_eq!(s["total"]["acknowledged"], 0);
    assert!(s["total"]["sent"].as_u64().unwrap() >= 5000);
    assert_eq!(s["total"]["sent"], s["total"]["received"], "{s:#}");
    assert_eq!(s["integrity"]["lost"], 0);
    assert_eq!(s["latency"]["publish"]["count"], 0);
    assert!(
        s["notes"].to_string().contains("not confirmed"),
        "{:#}",
        s["notes"]
    );
}

#[test]
fn auto_ack_consumers_are_lossless() {
    let _turn = serial();
    let run = rabbit_run(&short_with("2000", 2, &["ack.mode=auto"]));
    assert_lossless(&run);
}

#[test]
fn lazy_quorum_and_stream_queues_are_lossless_and_the_broker_says_it_made_them_so() {
    let _turn = serial();
    // The broker's word, not the driver's: the runs keep their queues, which the management
    // API then describes (the type, and a classic queue process's own mode) before they are
    // deleted. A plain classic queue is the control: mode "default".
    let cases = [
        ("queue.type=classic", "classic", Some("default")),
        ("queue.lazy=true", "classic", Some("lazy")),
        ("queue.type=quorum", "quorum", None),
        ("queue.type=stream", "stream", None),
    ];
    let prefix = format!("readback-{}-", std::process::id());
    let runs: Vec<Run> = (0..cases.len())
        .map(|i| {
            let exchange = format!("exchange.name={prefix}{i}");
            rabbit_run(&short_with(
                "1000",
                1,
                &[cases[i].0, "delete_queues=false", &exchange],
            ))
        })
        .collect();
    let queues = queues_with_statistics(&prefix);
    delete_rabbitmq_objects(&prefix);
    for (i, (run, (setting, kind, mode))) in runs.iter().zip(cases).enumerate() {
        assert_lossless(run);
        let own = format!("{prefix}{i}-");
        let queue = queues
            .iter()
            .find(|q| q["name"].as_str().unwrap().starts_with(&own))
            .unwrap_or_else(|| panic!("{setting}: no queue {own}* in {queues:#?}"));
        assert_eq!(queue["type"], kind, "{setting}: {queue:#}");
        if let Some(mode) = mode {
            assert_eq!(
                queue["backing_queue_status"]["mode"], mode,
                "{setting}: {queue:#}"
            );
        }
    }
}

/// The queues named `prefix*` once every classic one has reported its statistics (with its
/// mode): queues send them every 5 s (RabbitMQ's collect_statistics_interval), so a queue
/// of a run that just ended may not have yet. What there is after 30 s otherwise.
fn queues_with_statistics(prefix: &str) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let queues = rabbitmq_queues(prefix);
        let waiting = queues
            .iter()
            .any(|q| q["type"] == "classic" && q["backing_queue_status"].is_null());
        if !waiting || Instant::now() > deadline {
            return queues;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_queue_length_limit_with_reject_publish_counts_rejections_as_errors() {
    let _turn = serial();
    let run = rabbit_run(&short_with(
        "2000",
        2,
        &[
            "consumers_per_topic=0",
            "queue.max_length=100",
            "queue.overflow=reject-publish",
        ],
    ));
    assert_eq!(run.code, 1, "completed with errors\nstderr: {}", run.stderr);
    let s = run.summary();
    assert_eq!(s["status"], "complete");
    let rejected = s["errors"]["rejected"].as_u64().unwrap_or(0);
    assert!(
        rejected > 4000,
        "publishes beyond 100 queued are rejected: {s:#}"
    );
    assert_eq!(
        s["total"]["acknowledged"].as_u64().unwrap() + rejected,
        s["total"]["sent"].as_u64().unwrap()
    );
}

#[test]
fn an_unreachable_rabbitmq_exits_3_fast() {
    let _turn = serial();
    let started = Instant::now();
    let run = run(&[
        "--driver",
        RABBITMQ_DRIVER,
        "--set",
        "uri=amqp://guest:guest@127.0.0.1:1/%2f",
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        run.stderr.contains("127.0.0.1:1") && run.stderr.contains("brokerbench broker up rabbitmq"),
        "{}",
        run.stderr
    );
}

#[test]
fn wrong_credentials_exit_3_without_revealing_the_password() {
    let _turn = serial();
    let port = rabbitmq();
    let uri = format!("uri=amqp://guest:not-the-password-4711@127.0.0.1:{port}/%2f");
    let run = run(&["--driver", RABBITMQ_DRIVER, "--set", &uri]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.to_lowercase().contains("credentials"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("not-the-password-4711")
            && !run.stdout.contains("not-the-password-4711"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_openmessaging_benchmark_rabbitmq_driver_file_runs_unchanged() {
    let _turn = serial();
    let port = rabbitmq();
    let dir = tempfile::tempdir().unwrap();
    // OMB's RabbitMQ driver file format, and an OMB workload with two subscribers' worth of
    // consumers on one queue per topic.
    let driver = write(
        dir.path(),
        "rabbitmq.yaml",
        &format!(
            "name: RabbitMQ\ndriverClass: io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver\nproducerCreationDelay: 100\nproducerCreationBatchSize: 5\nconsumerCreationDelay: 100\nconsumerCreationBatchSize: 5\namqpUris:\n  - amqp://guest:guest@127.0.0.1:{port}\nmessagePersistence: false\nqueueType: QUORUM\n"
        ),
    );
    let workload = write(
        dir.path(),
        "workload.yaml",
        "name: 2 topics / 1 partition / 100b\ntopics: 2\npartitionsPerTopic: 1\nmessageSize: 100\nuseRandomizedPayloads: true\nrandomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 100\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 1\nproducerRate: 2000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 15\n",
    );
    let args = [
        workload.to_str().unwrap(),
        "--driver",
        driver.to_str().unwrap(),
        "--set",
        "duration=2s",
        "--set",
        "warmupDurationMinutes=0",
    ];
    let ran = run(&args);
    let s = assert_lossless(&ran);
    assert_eq!(s["driver"], "rabbitmq");
    let d = &ran.manifest()["driver"];
    assert_eq!(d["queue"]["type"], "quorum", "{d:#}");
    assert_eq!(d["exchange"]["type"], "fanout");
    assert_eq!(d["persistent"], false);
    assert_eq!(d["prefetch"], 0);
    assert!(
        !ran.file("manifest.json").contains("guest:guest"),
        "the URI's credentials are redacted"
    );
    // OMB's name for the queue type works with --set on such a file.
    let mut classic = args.to_vec();
    classic.extend(["--set", "queueType=CLASSIC"]);
    let ran = run(&classic);
    assert_lossless(&ran);
    assert_eq!(ran.manifest()["driver"]["queue"]["type"], "classic");
}
