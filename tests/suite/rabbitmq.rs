//! RabbitMQ against the real managed node (Debian's rabbitmq-server): the conformance suite,
//! and what is RabbitMQ's own. The broker's own figures come from its management API.

use std::time::{Duration, Instant};

use crate::common::shards::shards_merge_exactly;
use crate::common::*;
use crate::conformance::*;

pub static SUBJECT: Subject = Subject {
    family: "rabbitmq",
    // The broker's own rates (from its Prometheus endpoint): messages in, confirmed and
    // delivered agree with brokerbench's; its count is a sampled counter, not exact.
    counted: Counted {
        seconds: 2,
        sets: &["delete_queues=false"],
        prefix: "exchange.name={prefix}",
        exact: false,
        publish_slack_us: None,
        stored: confirmed_and_delivered_rates_agree,
        leftovers: Some(queue_names),
    },
    topology: Topology {
        sets: &["subscriptions_per_topic=2", "consumers_per_topic=2"],
        stored: None,
    },
    omb: omb_driver_files,
    unreachable: &["uri=amqp://bench:hunter2@127.0.0.1:1/%2f"],
    bad_fields: &[
        ("prefetc=5", "did you mean `prefetch`?"),
        ("uri=http://h:1", "amqp://"),
        ("exchange.type=direkt", "field `exchange.type`"),
        ("partitions_per_topic=3", "partitions_per_topic"),
    ],
    // Confirms, persistent messages and a quorum queue: nothing confirmed is lost. RabbitMQ
    // 3.10 answers again 13-17 s after a SIGKILL here, once 25 s.
    kill: Kill::with(&["queue.type=quorum", "persistent=true"], MayLose::Nothing),
    tls: Some(Tls {
        secret: Secret::InUrl("uri: amqps://"),
        shown: "amqps://brokerbench:***@",
        wrong_secret: &[
            "refused the credentials",
            "user 'brokerbench'",
            "password in the uri",
        ],
        untrusted: &["UnknownIssuer", "cacertfile"],
    }),
    // The consumer takes one message per round trip through the broker (prefetch 1, an
    // acknowledgement each) while the closed-loop producer keeps as many publishes in flight
    // as the broker confirms (measured: 51,497 acknowledged, 14,985 received). RabbitMQ's flow
    // control can hold the producer to the consumer's pace (2 of 11 classic runs on a busy
    // host left no backlog): the premise, not the claim, is tried again.
    unconsumed: Some(Unconsumed {
        rate: "max",
        sets: &["prefetch=1", "ack.multiple_every=1", "queue.type=classic"],
        evidence: "queue.declare passive",
        exits_clean: false,
        check: None,
    }),
    // A drop-head queue of at most 100 messages while the consumers wait for 5,000.
    dropped: Some(Dropped {
        rate: "5000",
        seconds: 2,
        limit: &["queue.max_length=100", "queue.overflow=drop-head"],
        backlog: "500KB",
        note: Some("dropped by the broker"),
    }),
};

conformance!(super::SUBJECT, tls, unconsumed, dropped);

/// Starts the managed node once for the suite, with TLS and a user (`broker up rabbitmq
/// --tls`: the plain listener is unchanged); its AMQP port.
fn rabbitmq() -> u16 {
    family_port("rabbitmq")
}

/// The broker confirmed and delivered at brokerbench's rates; the kept queue is deleted.
fn confirmed_and_delivered_rates_agree(prefix: &str, run: &Run, s: &serde_json::Value) {
    assert_broker_rate_agrees(
        run,
        s,
        "messages_confirmed_per_second",
        "acknowledged_per_s",
    );
    assert_broker_rate_agrees(run, s, "messages_delivered_per_second", "received_per_s");
    assert_eq!(queue_names(prefix).len(), 1, "the run's one queue");
    delete_rabbitmq_objects(prefix);
}

fn queue_names(prefix: &str) -> Vec<String> {
    rabbitmq_queues(prefix)
        .iter()
        .map(|q| q["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// OMB's RabbitMQ driver file format (quorum queues, transient messages), and OMB's name
/// for the queue type set with --set on such a file.
fn omb_driver_files(port: u16) -> Vec<OmbFile> {
    let text = format!(
        "name: RabbitMQ\ndriverClass: io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver\nproducerCreationDelay: 100\nproducerCreationBatchSize: 5\nconsumerCreationDelay: 100\nconsumerCreationBatchSize: 5\namqpUris:\n  - amqp://guest:guest@127.0.0.1:{port}\nmessagePersistence: false\nqueueType: QUORUM\n"
    );
    vec![
        OmbFile {
            name: "rabbitmq.yaml",
            text: text.clone(),
            sets: vec!["consumers_per_topic=2".into()],
            note: "OpenMessaging Benchmark RabbitMQ driver file",
            expect: Expect::Lossless,
            check: Some(read_as_omb_means_it),
        },
        OmbFile {
            name: "rabbitmq.yaml",
            text,
            sets: vec!["queueType=CLASSIC".into()],
            note: "OpenMessaging Benchmark RabbitMQ driver file",
            expect: Expect::Lossless,
            check: Some(|run, _| assert_eq!(run.manifest()["driver"]["queue"]["type"], "classic")),
        },
    ]
}

/// Quorum queues, a fanout exchange, transient messages, no prefetch limit, and the URI's
/// credentials redacted.
fn read_as_omb_means_it(run: &Run, _s: &serde_json::Value) {
    let d = &run.manifest()["driver"];
    assert_eq!(d["queue"]["type"], "quorum", "{d:#}");
    assert_eq!(d["exchange"]["type"], "fanout");
    assert_eq!(d["persistent"], false);
    assert_eq!(d["prefetch"], 0);
    assert!(
        !run.file("manifest.json").contains("guest:guest"),
        "the URI's credentials are redacted"
    );
}

/// An OMB workload file beside OMB's RabbitMQ driver file: two subscribers' worth of
/// consumers on one queue per topic, read as OMB means them.
#[test]
fn an_openmessaging_benchmark_workload_runs_with_its_rabbitmq_driver_file() {
    let _turn = serial();
    let port = rabbitmq();
    let dir = tempfile::tempdir().unwrap();
    let file = &omb_driver_files(port)[0];
    let driver = write(dir.path(), file.name, &file.text);
    let workload = write(
        dir.path(),
        "workload.yaml",
        "name: 2 topics / 1 partition / 100b\ntopics: 2\npartitionsPerTopic: 1\nmessageSize: 100\nuseRandomizedPayloads: true\nrandomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 100\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 1\nproducerRate: 2000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 15\n",
    );
    let ran = run(&[
        workload.to_str().unwrap(),
        "--driver",
        driver.to_str().unwrap(),
        "--set",
        "duration=2s",
        "--set",
        "warmupDurationMinutes=0",
    ]);
    let s = assert_lossless(&ran);
    assert_eq!(s["driver"], "rabbitmq");
    assert_eq!(s["consumers"].as_array().map(Vec::len), Some(4), "{s:#}");
    read_as_omb_means_it(&ran, &s);
}

#[test]
fn a_quorum_queue_keeps_what_a_cancelled_consumer_had_checked_out_as_unconsumed() {
    // A quorum queue keeps a cancelled consumer's checked-out messages unsent: they count too.
    checks::unconsumed_with(
        &SUBJECT,
        &["prefetch=1", "ack.multiple_every=1", "queue.type=quorum"],
        "queue.declare passive",
    );
}

#[test]
fn backlog_mode_stops_taking_deliveries_builds_and_drains_losslessly() {
    let _turn = serial();
    // 500 kB of 100-byte messages is 5,000: 2.5 s at 2,000 msg/s; the queue holds them
    // (prefetch bounds what the paused consumer's connection takes). At 5,000 msg/s a host
    // with both cores busy (a core kept busy, and the suite's other lanes) confirmed 4,264
    // msg/s, and the sends the client's buffer held back were counted not sent.
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with("2000", 2, &["backlog.size=500KB", "backlog.drain_ratio=1"]),
    );
    assert_backlog(&run, 5_000, 2.0);
}

#[test]
fn fanout_queues_each_receive_every_message() {
    let _turn = serial();
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with("1000", 2, &["exchange.type=fanout", "queues_per_topic=3"]),
    );
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
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with("1000", 2, &["subscriptions_per_topic=2"]),
    );
    assert_lossless_copies(&run, 2);
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with(
            "1000",
            1,
            &["subscriptions_per_topic=2", "queues_per_topic=3"],
        ),
    );
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
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with("2000", 2, &["confirms.enabled=false"]),
    );
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
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with("2000", 2, &["ack.mode=auto"]),
    );
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
            family_run(
                "rabbitmq",
                RABBITMQ_DRIVER,
                &short_with("1000", 1, &[cases[i].0, "delete_queues=false", &exchange]),
            )
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
    let run = family_run(
        "rabbitmq",
        RABBITMQ_DRIVER,
        &short_with(
            "2000",
            2,
            &[
                "consumers_per_topic=0",
                "queue.max_length=100",
                "queue.overflow=reject-publish",
            ],
        ),
    );
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
fn the_client_certificate_logs_in_over_amqps_with_sasl_external() {
    let _turn = serial();
    rabbitmq();
    let (driver, _) = &checks::tls_driver("rabbitmq", &Secret::InUrl("uri: amqps://"));
    // The client certificate instead of the password: SASL EXTERNAL, as its common name.
    let external = driver
        .lines()
        .find_map(|line| line.strip_prefix("# uri: "))
        .unwrap_or_else(|| panic!("no EXTERNAL uri in the driver file:\n{driver}"));
    assert!(external.contains("auth_mechanism=external"), "{external}");
    assert_lossless(&run_driver_text(
        &format!("driver: rabbitmq\nuri: '{external}'\n"),
        &[],
    ));
}

/// Paused by the workload's own fault (`action: pause` of the single node): the fault and the
/// stall it made are both in the summary, the stall inside the fault's window and its note
/// naming the fault.
#[test]
fn a_paused_rabbitmq_is_a_stall_not_an_outage() {
    let _turn = serial();
    rabbitmq();
    let sets = short("2000", 10);
    let extra = [
        "--driver",
        RABBITMQ_DRIVER,
        "--fault",
        "at=2s,action=pause,node=1,for=3s",
    ];
    let run = run_in(tempfile::tempdir().unwrap(), &with_sets(&sets, &extra));
    assert_stalled_once(&run);
    let s = run.summary();
    let pause = &s["faults"][0];
    assert_eq!(pause["action"], "pause", "{pause:#}");
    assert_eq!(
        pause["pid"].as_u64(),
        Some(u64::from(broker_pid("rabbitmq"))),
        "{pause:#}"
    );
    let (from, to) = (
        pause["injected_at_s"].as_f64().unwrap(),
        pause["ended_at_s"].as_f64().unwrap(),
    );
    assert!((2.9..to).contains(&from) && to - from >= 3.0, "{pause:#}");
    let stall = s["stalls"][0]["start_s"].as_f64().unwrap();
    assert!((from - 1.0..to).contains(&stall), "{s:#}");
    let notes = s["notes"].to_string();
    assert!(
        notes.contains("FAULT 1 (pause of node 1") && notes.contains("made the STALL"),
        "{notes}"
    );
}

#[test]
fn a_silent_rabbitmq_is_found_gone_within_two_heartbeat_intervals() {
    let _turn = serial();
    let port = rabbitmq();
    let dir = tempfile::tempdir().unwrap();
    let driver = write(
        dir.path(),
        "rabbitmq.yaml",
        &format!("driver: rabbitmq\nuri: amqp://guest:guest@127.0.0.1:{port}/%2f?heartbeat=1\n"),
    );
    let sets = short("2000", 12);
    let (run, paused_at) = run_through_a_pause_of(
        "rabbitmq",
        Duration::from_secs(4),
        &sets,
        &["--driver", driver.to_str().unwrap()],
    );
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{s:#}");
    assert_eq!(s["integrity"]["lost"], 0, "{s:#}");
    let outages = s["outages"].as_array().unwrap();
    assert_eq!(
        outages.len(),
        1,
        "the silent connection was given up: {s:#}"
    );
    // Second 0 of timeseries.csv is the start of warm-up, which outage times count from.
    let rows = run.file("timeseries.csv");
    let first_row: f64 = rows
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let found = first_row + outages[0]["start_s"].as_f64().unwrap() - paused_at;
    assert!(
        (1.0..=3.0 + run.late.as_secs_f64()).contains(&found),
        "found gone {found:.2} s after the broker went silent (heartbeat 1 s: within 2 intervals): {s:#}"
    );
    assert!(
        outages[0]["first_ack_s"].as_f64().is_some(),
        "reconnected after the pause: {s:#}"
    );
    eprintln!("found gone {found:.2} s after the broker went silent");
}

#[test]
fn live_figures_of_a_rabbitmq_run_pass_promtool_and_cover_the_dashboard() {
    let _turn = serial();
    rabbitmq();
    let (run, text) = scrape_live_run(&["--driver", RABBITMQ_DRIVER]);
    assert_lossless(&run);
    promtool_finds_nothing(&text);
    // Kafka's own broker metrics are not served for RabbitMQ.
    let kafka_only = [
        "brokerbench_broker_messages_in_per_second",
        "brokerbench_broker_request_handler_idle_ratio",
        "brokerbench_broker_network_processor_idle_ratio",
        "brokerbench_broker_request_queue_size",
        "brokerbench_broker_under_replicated_partitions",
        "brokerbench_broker_jvm_heap_used_bytes",
    ];
    dashboard_metrics_exist(&text, &kafka_only);
}

#[test]
fn rabbitmq_shards_merge_exactly() {
    let _turn = serial();
    rabbitmq();
    shards_merge_exactly(
        2,
        &[
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "rate=2000",
            "warmup=1s",
            "duration=2s",
        ],
        Some(RABBITMQ_DRIVER),
    );
}
