//! Kafka's clients: acks, the consumer group's pause for a backlog, many topics over a few
//! clients, when acknowledgements are timed, and the secrets a Kafka client is given.

use super::*;

#[test]
fn acks_0_1_and_all_are_lossless() {
    let _turn = serial();
    kafka();
    for acks in ["0", "1", "all"] {
        let mut sets = short("2000", 2);
        sets.push(format!("producer_config.acks={acks}"));
        let run = run(&with_sets(&sets, &[]));
        let s = assert_lossless(&run);
        let notes = s["notes"].to_string();
        assert_eq!(
            acks == "0",
            notes.contains("acks=0"),
            "acks={acks}: {notes}"
        );
    }
}

#[test]
fn backlog_mode_pauses_both_consumers_of_a_group_builds_and_drains_losslessly() {
    let _turn = serial();
    kafka();
    // 5,000 msg/s of 100 B; 1 MB is 10,000 messages: about 2 s of building.
    let mut sets = short("5000", 2);
    sets.extend(
        [
            "partitions_per_topic=2",
            "consumers_per_topic=2",
            "backlog.size=1MB",
            "backlog.drain_ratio=1",
        ]
        .map(String::from),
    );
    let run = run(&with_sets(&sets, &[]));
    assert_backlog(&run, 10_000, 2.0);
}

#[test]
fn producers_of_many_topics_share_a_few_clients_and_keep_their_own_acknowledgements() {
    let _turn = serial();
    kafka();
    // 12 topics × 2 producers: 24 producer tasks on 4 producer threads, the 6 tasks of each
    // thread sending through a librdkafka client of its own (`producer_clients: per_thread`),
    // each task's acknowledgements routed back to it (the ledger checks every sequence of
    // every task). The 40-topic run below has the default, one client for all.
    // An idempotent producer: a new topic's partition answers its first requests with an
    // error now and then, and librdkafka puts their messages back in the partition's queue
    // (as sends made again, not as retried requests) while newer requests in flight land;
    // without idempotence they are stored after them (10 of 19,200 out of order once, with a
    // core kept busy). What is checked here is how acknowledgements are routed.
    let mut sets = short("4800", 3);
    sets.extend(
        [
            "topics=12",
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "producer_clients=per_thread",
            "producer_config.acks=all",
            "producer_config.enable.idempotence=true",
        ]
        .map(String::from),
    );
    let routed = run(&with_sets(&sets, &[]));
    let s = assert_lossless(&routed);
    let consumers = s["consumers"].as_array().unwrap();
    assert_eq!(consumers.len(), 24, "{s:#}");
    // One partition per topic, two members in a group that spans the topics: round robin
    // gives both members topics (the range assignor would give every topic to the same one).
    let busy_members: std::collections::BTreeSet<u64> = consumers
        .iter()
        .filter(|c| c["received"].as_u64().unwrap() > 0)
        .map(|c| c["member"].as_u64().unwrap())
        .collect();
    assert_eq!(busy_members.len(), 2, "{consumers:#?}");

    // 40 topics, a producer and a consumer each: the clients' librdkafka threads do not grow
    // with the topics (a client has a handful of threads; one per producer and per consumer
    // would add some 300). 4 producer threads share one client; the shared consumer serves
    // all 40 topics' slots from one thread.
    // An idempotent producer, as above (106 out of order came once without one). 1,000 msg/s
    // over the forty: forty clients of their own (the third run) cost 450 CPU-s per million
    // messages at 4,000 msg/s, more than two busy cores left them (16 sends fell behind the
    // schedule once).
    let mut sets = short("1000", 2);
    sets.extend(
        [
            "topics=40",
            "producer_config.acks=all",
            "producer_config.enable.idempotence=true",
        ]
        .map(String::from),
    );
    let shared = run(&with_sets(&sets, &[]));
    assert_lossless(&shared);
    assert_eq!(shared.manifest()["driver"]["producer_clients"], "shared");
    // The most threads any sample of the run saw, warm-up and drain included: the summary's
    // `threads_max` is the measured window's, and a host with both cores taken once delayed a
    // sample until the clients were closing (326 threads in every earlier sample, 109 in the
    // one the two-second window counted).
    let threads = |run: &Run| {
        let csv = run.file("resources.csv");
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let column = header.iter().position(|c| *c == "client_threads").unwrap();
        lines
            .filter_map(|l| l.split(',').nth(column)?.parse::<u64>().ok())
            .max()
            .expect("client threads sampled")
    };
    sets.extend(
        [
            "producer_clients=per_producer",
            "consumer_clients=per_consumer",
        ]
        .map(String::from),
    );
    let separate = run(&with_sets(&sets, &[]));
    assert_lossless(&separate);
    let driver = &separate.manifest()["driver"];
    assert_eq!(driver["producer_clients"], "per_producer");
    assert_eq!(driver["consumer_clients"], "per_consumer");
    let (shared, separate) = (threads(&shared), threads(&separate));
    assert!(
        shared < 40 + 30 && separate > shared + 150,
        "client threads: {shared} shared, {separate} one client per task"
    );
}

#[test]
fn acknowledgements_are_timed_when_they_arrive_not_when_the_producer_wakes() {
    let _turn = serial();
    kafka();
    // At 400 msg/s the producer sleeps 2.5 ms between sends; an acknowledgement timed when
    // the producer next looks would carry part of that sleep into publish latency.
    let sets = short("400", 4);
    let run = run(&with_sets(&sets, &[]));
    let s = assert_lossless(&run);
    let publish = s["latency"]["publish"]["p50_ns"].as_u64().unwrap();
    let e2e = s["latency"]["end_to_end"]["p50_ns"].as_u64().unwrap();
    assert!(
        publish < e2e + 300_000,
        "publish p50 {publish} ns must not exceed end-to-end p50 {e2e} ns: the consumer sees a message after it is acknowledged"
    );
}

#[test]
fn credentials_never_reach_results_or_output() {
    let _turn = serial();
    kafka();
    let mut sets = short("1000", 1);
    sets.push("producer_config.sasl.password=hunter2-secret".into());
    sets.push("consumer_config.sasl.password=hunter2-secret".into());
    let run = run(&with_sets(&sets, &[]));
    assert!(!run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"));
    for entry in std::fs::read_dir(&run.folder).unwrap() {
        let path = entry.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(
            !text.contains("hunter2"),
            "{} leaks the password",
            path.display()
        );
    }
    assert!(run.manifest().to_string().contains("***"));
}

/// What every secret of the test below holds: with its `-`, which base64 (the histogram logs'
/// encoding) never writes, so a log's random text cannot hold it by chance ("Zq7" alone did:
/// window.hlog of a fresh-clone run, 2026-11-27).
const SECRET_MARK: &str = "Zq7-";

#[test]
fn secrets_given_every_way_reach_no_output() {
    let _turn = serial();
    kafka();
    let metrics = brokerbench_kafka::managed::Kafka::new(&brokerbench_brokers::home())
        .metrics_url()
        .expect("the managed Kafka serves metrics");
    let with_user = metrics.replacen("http://", "http://scraper:Zq7-url-secret@", 1);
    let dir = tempfile::tempdir().unwrap();
    // In a driver file: a client setting and the metrics endpoint's password.
    let driver = write(
        dir.path(),
        "driver.yaml",
        "driver: kafka\nproducer_config: {sasl.password: Zq7-file-secret, acks: '1'}\nconsumer_config: {sasl.password: Zq7-file-consumer-secret}\n",
    );
    let mut sets = short("1000", 1);
    sets.push("consumer_config.sasl.password=Zq7-set-secret".into());
    let run = brokerbench()
        .arg("run")
        .args(with_sets(&sets, &[]))
        // One argument with '=', and a URL with user info in a flag.
        .arg("--set=producer_config.sasl.password=Zq7-joined-secret")
        .args(["--driver", driver.to_str().unwrap()])
        .args(["--broker-metrics", &with_user])
        .args(["--out", dir.path().join("run").to_str().unwrap()])
        .env("BROKERBENCH_METRICS_PASSWORD", "Zq7-env-secret")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(0), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains(SECRET_MARK) && !stderr.contains(SECRET_MARK),
        "{stdout}\n{stderr}"
    );
    let folder = dir.path().join("run");
    let files = files_under(&folder);
    assert!(files.len() >= 8, "{files:?}");
    for path in files {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(
            !text.contains(SECRET_MARK),
            "{} leaks a secret",
            path.display()
        );
    }
    let manifest = std::fs::read_to_string(folder.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("scraper:***@") && manifest.contains("\"sasl.password\": \"***\""),
        "redacted, not dropped: {manifest}"
    );
}

/// A topic setting the broker refuses stops the run before it sends, with the broker's reason
/// and the setting named.
#[test]
fn a_topic_setting_the_broker_refuses_stops_the_run_naming_it() {
    let _turn = serial();
    kafka();
    let sets = short_with("1000", 1, &["topic_config.cleanup.policy=nonsense"]);
    let refused = run(&with_sets(&sets, &[]));
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("InvalidConfig") && refused.stderr.contains("topic_config"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_drain_cut_off_while_consumers_receive_counts_what_they_had_not_reached_as_unconsumed() {
    let _turn = serial();
    kafka();
    // Two producers at max rate into three partitions, read by a group of two whose fetches
    // the broker holds 500 ms and caps at 200 KB a partition (1 MB in all): the consumers still receive when
    // the 2-s drain ends, millions behind. Each partition's count rests on the offset after
    // the last message brokerbench received there.
    let sets = [
        "rate=max",
        "warmup=1s",
        "duration=3s",
        "drain_timeout=2s",
        "partitions_per_topic=3",
        "producers_per_topic=2",
        "consumers_per_topic=2",
        "consumer_config.fetch.min.bytes=100000000",
        "consumer_config.fetch.wait.max.ms=500",
        "consumer_config.max.partition.fetch.bytes=200000",
        "consumer_config.fetch.max.bytes=1000000",
    ];
    let run = run(&with_sets_of(&sets, &[]));
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let s = run.summary();
    let i = &s["integrity"];
    let count = |field: &str| {
        i[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {i:#}"))
    };
    let received = s["total"]["received"].as_u64().unwrap();
    assert!(received > 0 && count("unconsumed") > 0, "{s:#}");
    assert_eq!(count("lost"), 0, "{s:#}");
    assert_eq!(
        received + count("unconsumed"),
        s["total"]["acknowledged"].as_u64().unwrap(),
        "{s:#}"
    );
    let evidence = i["unconsumed_evidence"].as_str().unwrap_or_default();
    assert!(
        evidence.contains("last message brokerbench received"),
        "{evidence}"
    );
}
