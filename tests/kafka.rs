//! Integration tests against the real managed Kafka (started by these tests if needed).

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn quickstart_at_a_modest_rate_is_lossless_and_writes_every_result_file() {
    let _turn = serial();
    kafka();
    let sets = short("5000", 3);
    let run = run(&with_sets(&sets, &["--json"]));
    let s = assert_lossless(&run);
    let printed: serde_json::Value =
        serde_json::from_str(&run.stdout).expect("--json prints the summary");
    assert_eq!(printed, s);
    assert!(
        (s["throughput"]["acknowledged_per_s"].as_f64().unwrap() - 5000.0).abs()
            < rate_slack(&s, 5000.0),
        "{s:#}"
    );
    assert_eq!(s["mode"], "open-loop");
    assert!(s["latency"]["publish"]["count"].as_u64().unwrap() >= 14_000);
    assert!(s["latency"]["end_to_end"]["p50_ns"].as_u64().unwrap() > 0);
    assert_eq!(run.manifest()["status"], "complete");
    assert_eq!(run.manifest()["broker"]["managed"], true);
    let csv = run.file("timeseries.csv");
    assert!(
        csv.lines().count() >= 5,
        "header + one row per second:\n{csv}"
    );
    for hlog in ["publish.hlog", "e2e.hlog"] {
        let text = run.file(hlog);
        assert!(
            text.starts_with("#[Histogram log format version 1.3]"),
            "{text}"
        );
        assert!(
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
                .count()
                >= 4
        );
    }
}

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
fn two_subscriptions_are_two_groups_each_receiving_every_message() {
    let _turn = serial();
    kafka();
    let mut sets = short("2000", 2);
    sets.extend(
        [
            "partitions_per_topic=2",
            "consumers_per_topic=2",
            "subscriptions_per_topic=2",
        ]
        .map(String::from),
    );
    let run = run(&with_sets(&sets, &[]));
    let s = assert_lossless_copies(&run, 2);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    assert!(acknowledged >= 5000, "{s:#}");
    let mut per_subscription = [0u64; 2];
    for c in s["consumers"].as_array().unwrap() {
        per_subscription[c["subscription"].as_u64().unwrap() as usize] +=
            c["received"].as_u64().unwrap();
    }
    assert_eq!(per_subscription, [acknowledged; 2], "{s:#}");
}

#[test]
fn three_partitions_are_shared_by_three_consumers() {
    let _turn = serial();
    kafka();
    let mut sets = short("3000", 3);
    sets.extend(
        [
            "partitions_per_topic=3",
            "consumers_per_topic=3",
            "keys=round-robin",
        ]
        .map(String::from),
    );
    let run = run(&with_sets(&sets, &[]));
    let s = assert_lossless(&run);
    let shares = received_per_consumer(&s);
    assert_eq!(shares.len(), 3, "{s:#}");
    assert!(
        shares.iter().all(|&n| n > 0),
        "every consumer receives a share: {shares:?}"
    );
}

#[test]
fn producers_of_many_topics_share_a_few_clients_and_keep_their_own_acknowledgements() {
    let _turn = serial();
    kafka();
    // 12 topics × 2 producers: 24 producer tasks on 4 producer threads, the 6 tasks of each
    // thread sending through a librdkafka client of its own (`producer_clients: per_thread`),
    // each task's acknowledgements routed back to it (the ledger checks every sequence of
    // every task). The 40-topic run below has the default, one client for all.
    let mut sets = short("4800", 3);
    sets.extend(
        [
            "topics=12",
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "producer_clients=per_thread",
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
    let mut sets = short("4000", 2);
    sets.push("topics=40".into());
    let shared = run(&with_sets(&sets, &[]));
    assert_lossless(&shared);
    assert_eq!(shared.manifest()["driver"]["producer_clients"], "shared");
    let threads = |run: &Run| {
        run.summary()["resources"]["client"]["threads_max"]
            .as_u64()
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
fn file_replay_from_ram_and_from_disk() {
    let _turn = serial();
    kafka();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sensor.tsv");
    brokerbench()
        .args(["data", "generate", "--records", "500", "--out"])
        .arg(&data)
        .assert()
        .success();
    for read_in_ram in ["true", "false"] {
        let mut sets = short("2000", 2);
        sets.push(format!(
            "payload={{kind: file, path: '{}', read_in_ram: {read_in_ram}}}",
            data.display()
        ));
        let run = run(&with_sets(&sets, &[]));
        let s = assert_lossless(&run);
        let bytes = s["total"]["bytes_acknowledged"].as_f64().unwrap()
            / s["total"]["acknowledged"].as_f64().unwrap();
        assert!(
            (190.0..230.0).contains(&bytes),
            "24-byte header + ~180-byte record, got {bytes}"
        );
    }
}

#[test]
fn sensor_payloads_are_generated_on_the_fly() {
    let _turn = serial();
    kafka();
    let mut sets = short("2000", 2);
    sets.push("payload.kind=sensor".into());
    let run = run(&with_sets(&sets, &[]));
    let s = assert_lossless(&run);
    let bytes =
        s["total"]["bytes_received"].as_f64().unwrap() / s["total"]["received"].as_f64().unwrap();
    assert!((190.0..230.0).contains(&bytes), "{bytes}");
}

#[test]
fn max_rate_mode_is_a_bounded_closed_loop() {
    let _turn = serial();
    kafka();
    // Produce only: at max rate the producer outruns one consumer many times over, and what
    // is unread when the drain ends would count as lost.
    let mut sets = short("max", 3);
    sets.push("consumers_per_topic=0".into());
    let run = run(&with_sets(&sets, &[]));
    assert_eq!(
        run.code, 0,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    let s = run.summary();
    assert_eq!(s["total"]["sent"], s["total"]["acknowledged"], "{s:#}");
    assert_eq!(s["integrity"]["unacknowledged"], 0);
    assert_eq!(s["mode"], "max-rate");
    assert!(
        s["throughput"]["acknowledged_per_s"].as_f64().unwrap() > 10_000.0,
        "{s:#}"
    );
    assert!(s["notes"].to_string().contains("not open-loop"));
}

#[test]
fn an_unreachable_broker_exits_3_fast_naming_the_address() {
    let _turn = serial();
    let started = Instant::now();
    let run = run(&["--set", "bootstrap_servers=127.0.0.1:1"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(run.stderr.contains("127.0.0.1:1"), "{}", run.stderr);
    assert!(
        run.stderr.contains("brokerbench broker up kafka"),
        "{}",
        run.stderr
    );
    assert!(
        !run.folder.exists(),
        "nothing is written before the broker answers"
    );
}

#[test]
fn a_malformed_workload_exits_2_naming_the_field() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad.yaml", "name: bad\nrat: 5000\n");
    let bad = run(&[file.to_str().unwrap()]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("bad.yaml"), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("unknown field `rat`") && bad.stderr.contains("did you mean `rate`?"),
        "{}",
        bad.stderr
    );
    let file = write(dir.path(), "small.yaml", "message_size: 8B\n");
    let small = run(&[file.to_str().unwrap()]);
    assert_eq!(small.code, 2);
    assert!(
        small.stderr.contains("message_size") && small.stderr.contains("envelope header"),
        "{}",
        small.stderr
    );
}

/// Resumes the broker even if an assertion fails while it is stopped.
struct Resume(i32);
impl Drop for Resume {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

#[test]
fn a_one_second_broker_pause_shows_in_publish_p99_and_max() {
    let _turn = serial();
    let pid = kafka() as i32;
    let dir = tempfile::tempdir().unwrap();
    let folder = results_folder(dir.path());
    let pauser = std::thread::spawn(move || {
        // 1 s warm-up + 2 s of measurement (the run's own rows), then a 1 s stall.
        let measuring = wait_for_measured_seconds(&folder, 2);
        let _resume = Resume(pid);
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        std::thread::sleep(Duration::from_secs(1));
        measuring
    });
    let sets = short("2000", 6);
    let run = run_in(dir, &with_sets(&sets, &[]));
    assert!(
        pauser.join().unwrap(),
        "the run never measured 2 s\nstderr: {}",
        run.stderr
    );
    let s = assert_lossless(&run);
    let publish = &s["latency"]["publish"];
    let max = publish["max_ns"].as_u64().unwrap();
    let p99 = publish["p99_ns"].as_u64().unwrap();
    // About 1/6 of the window's messages were due during the stall, waiting up to 1 s.
    assert!(
        max >= 900_000_000,
        "max {max} ns must show the 1 s stall: {publish:#}"
    );
    assert!(
        p99 >= 500_000_000,
        "p99 {p99} ns must show the stall: {publish:#}"
    );
    assert!(s["latency"]["end_to_end"]["max_ns"].as_u64().unwrap() >= 900_000_000);
    assert_not_client_bound(&run, &s, "a broker stall is not the client's fault");
}

/// Starts `brokerbench run --quiet` with `sets` writing into a new folder; the child, the
/// folder and the temporary directory that holds it.
fn spawn_run(sets: &[&str]) -> (std::process::Child, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let folder = results_folder(dir.path());
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("brokerbench"));
    command.args(["run", "--quiet"]);
    for set in sets {
        command.args(["--set", set]);
    }
    let child = command
        .arg("--out")
        .arg(&folder)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, folder, dir)
}

/// Waits until the run writing `folder` has written its first row (of any phase).
fn wait_for_first_row(folder: &std::path::Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let rows = std::fs::read_to_string(folder.join("timeseries.csv"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if rows >= 2 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn json_file(folder: &std::path::Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(folder.join(name)).unwrap()).unwrap()
}

/// Sends `signal` once the run has measured 2 s; checks the drain, the files and the marks.
fn stopped_in_measurement_by(signal: i32) {
    let (mut child, folder, _dir) = spawn_run(&["rate=1000", "warmup=1s", "duration=60s"]);
    // 2 s into the measurement, counted from the run's own rows.
    let measuring = wait_for_measured_seconds(&folder, 2);
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(measuring, "the run never measured 2 s");
    assert_eq!(status.code(), Some(130));
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
    let summary = json_file(&folder, "summary.json");
    assert_eq!(summary["status"], "interrupted");
    assert!(summary["total"]["acknowledged"].as_u64().unwrap() > 1000);
    assert_eq!(summary["integrity"]["lost"], 0);
}

#[test]
fn ctrl_c_drains_writes_everything_and_marks_the_run_interrupted() {
    let _turn = serial();
    kafka();
    stopped_in_measurement_by(libc::SIGINT);
}

#[test]
fn sigterm_is_taken_as_ctrl_c() {
    let _turn = serial();
    kafka();
    stopped_in_measurement_by(libc::SIGTERM);
}

#[test]
fn ctrl_c_in_the_warm_up_still_writes_a_summary() {
    let _turn = serial();
    kafka();
    let (mut child, folder, _dir) = spawn_run(&["rate=1000", "warmup=60s", "duration=10s"]);
    assert!(wait_for_first_row(&folder), "the run never wrote a row");
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let summary = json_file(&folder, "summary.json");
    assert_eq!(summary["status"], "interrupted", "{summary:#}");
    assert_eq!(summary["integrity"]["lost"], 0, "{summary:#}");
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
}

#[test]
fn a_second_ctrl_c_while_draining_ends_the_run_at_once() {
    let _turn = serial();
    kafka();
    // linger.ms=5000 keeps every message in the client for 5 s: the drain after the first
    // Ctrl-C waits for them.
    let (mut child, folder, _dir) = spawn_run(&[
        "rate=1000",
        "warmup=1s",
        "duration=60s",
        "drain_timeout=30s",
        "producer_config.linger.ms=5000",
    ]);
    assert!(wait_for_first_row(&folder), "the run never wrote a row");
    let lateness = WakeupLateness::start();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first Ctrl-C drains: the run is still waiting for its messages"
    );
    let second = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    let late = lateness.worst();
    assert!(
        second.elapsed() < Duration::from_secs(2) + late * 4,
        "took {:?} (the host woke threads up to {late:?} late)",
        second.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    // Left as a folder marked interrupted, with the rows written so far.
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
    let rows = std::fs::read_to_string(folder.join("timeseries.csv")).unwrap();
    assert!(rows.lines().count() >= 2, "{rows}");
}

#[test]
fn a_killed_run_leaves_a_folder_marked_interrupted_with_its_rows() {
    let _turn = serial();
    kafka();
    let (mut child, folder, _dir) = spawn_run(&["rate=1000", "warmup=1s", "duration=60s"]);
    let measuring = wait_for_measured_seconds(&folder, 2);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(measuring, "the run never measured 2 s");
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
    assert!(
        !folder.join("summary.json").exists(),
        "no summary for a killed run"
    );
    let rows = std::fs::read_to_string(folder.join("timeseries.csv")).unwrap();
    assert!(
        rows.lines().count() >= 4,
        "the rows written so far are kept: {rows}"
    );
    // The report of what there is can still be made.
    let report = brokerbench()
        .args(["report"])
        .arg(&folder)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    assert!(folder.join("report.html").exists());
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
fn an_openmessaging_benchmark_workload_file_runs_unchanged() {
    let _turn = serial();
    kafka();
    // An OMB checkout's layout: workloads/ beside payload/, the payload file exactly
    // messageSize bytes; the workload written in OMB's own fields (testDurationMinutes: 15 and
    // the default one-minute warm-up are shortened from the command line, with brokerbench's
    // and OMB's names).
    let checkout = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(checkout.path().join("workloads")).unwrap();
    std::fs::create_dir_all(checkout.path().join("payload")).unwrap();
    let bytes: Vec<u8> = (0..512u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(checkout.path().join("payload/payload-512b.data"), bytes).unwrap();
    let workload = write(
        &checkout.path().join("workloads"),
        "2-partitions-512b.yaml",
        "name: 1 topic / 2 partitions / 512b\ntopics: 1\npartitionsPerTopic: 2\nkeyDistributor: \"KEY_ROUND_ROBIN\"\nmessageSize: 512\npayloadFile: \"payload/payload-512b.data\"\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 2\nproducerRate: 3000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 15\n",
    );
    let workload = workload.to_str().unwrap();
    let copy = checkout.path().join("result.json");
    let omb = run(&[
        workload,
        "--omb-result",
        copy.to_str().unwrap(),
        "--set",
        "duration=3s",
        "--set",
        "warmupDurationMinutes=0",
        "--set",
        "drain_timeout=10s",
    ]);
    let s = assert_lossless(&omb);
    let w = &omb.manifest()["workload"];
    assert_eq!(w["name"], "1-topic-2-partitions-512b", "{w:#}");
    assert_eq!(w["payload"]["kind"], "binary", "{w:#}");
    assert_eq!(
        (
            w["partitions_per_topic"].as_u64(),
            w["producers_per_topic"].as_u64(),
            w["consumers_per_topic"].as_u64()
        ),
        (Some(2), Some(2), Some(2)),
        "{w:#}"
    );
    assert_eq!(w["keys"], "round-robin");
    assert_eq!(w["rate"], 3000.0);
    assert_eq!(s["total"]["acknowledged"].as_u64(), Some(9000), "{s:#}");
    assert_eq!(s["consumers"].as_array().map(Vec::len), Some(2));

    // OMB's TestResult: every field in its order, OMB's units, one (3-second) period.
    let text = omb.file("omb-result.json");
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        text,
        "--omb-result copies it"
    );
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    let points = [
        "Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max",
    ];
    let mut expected: Vec<String> = [
        "workload",
        "driver",
        "messageSize",
        "topics",
        "partitions",
        "producersPerTopic",
        "consumersPerTopic",
        "publishRate",
        "publishErrorRate",
        "consumeRate",
        "backlog",
    ]
    .map(String::from)
    .to_vec();
    for group in [
        "publishLatency",
        "publishDelayLatency",
        "aggregatedPublishLatency",
        "aggregatedPublishDelayLatency",
    ] {
        expected.extend(points.map(|p| format!("{group}{p}")));
    }
    expected.push("aggregatedPublishLatencyQuantiles".into());
    expected.push("aggregatedPublishDelayLatencyQuantiles".into());
    expected.extend(points.map(|p| format!("endToEndLatency{p}")));
    expected.push("aggregatedEndToEndLatencyQuantiles".into());
    expected.extend(points.map(|p| format!("aggregatedEndToEndLatency{p}")));
    assert_eq!(keys, expected);
    assert_eq!(r["messageSize"], 512);
    assert_eq!(
        (r["partitions"].as_u64(), r["consumersPerTopic"].as_u64()),
        (Some(2), Some(2))
    );
    let rate = r["publishRate"].as_array().unwrap();
    assert_eq!(rate.len(), 1, "{r:#}");
    assert!((rate[0].as_f64().unwrap() - 3000.0).abs() < 60.0, "{r:#}");
    // Milliseconds from the same histograms as the summary's nanoseconds.
    let close = |ms: &serde_json::Value, ns: &serde_json::Value| {
        let (ms, ns) = (ms.as_f64().unwrap(), ns.as_f64().unwrap());
        assert!(
            (ms - ns / 1e6).abs() <= ns / 1e6 * 0.01 + 1e-6,
            "{ms} ms vs {ns} ns"
        );
    };
    let latency = &s["latency"];
    close(
        &r["aggregatedPublishLatency99pct"],
        &latency["publish"]["p99_ns"],
    );
    close(
        &r["aggregatedEndToEndLatency50pct"],
        &latency["end_to_end"]["p50_ns"],
    );
    close(
        &r["aggregatedPublishLatencyMax"],
        &latency["publish"]["max_ns"],
    );
    // Publish delay is schedule lag, in whole microseconds.
    let lag_us = latency["schedule_lag"]["p50_ns"].as_u64().unwrap() / 1000;
    assert!(
        r["aggregatedPublishDelayLatency50pct"]
            .as_u64()
            .unwrap()
            .abs_diff(lag_us)
            <= lag_us / 100 + 1
    );
    // The quantile map ends at 100% with the maximum, keyed as Java writes doubles.
    let quantiles = r["aggregatedPublishLatencyQuantiles"].as_object().unwrap();
    assert!(quantiles.len() > 20, "{quantiles:?}");
    close(&quantiles["100.0"], &latency["publish"]["max_ns"]);
}

#[test]
fn omb_java_client_settings_run_in_librdkafkas_terms_and_the_manifest_says_so() {
    let _turn = serial();
    kafka();
    let dir = tempfile::tempdir().unwrap();
    // The settings of OMB's kafka-big-batches and kafka-throughput driver files, in OMB's
    // format: a Java property librdkafka names otherwise, and a timeout past librdkafka's
    // range. No bootstrap.servers: the managed local Kafka.
    let driver = write(
        dir.path(),
        "kafka-big-throughput.yaml",
        "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\nreplicationFactor: 1\ntopicConfig: |\n  min.insync.replicas=1\ncommonConfig: |\n  default.api.timeout.ms=1200000\n  request.timeout.ms=1200000\nproducerConfig: |\n  acks=all\n  linger.ms=100\n  batch.size=1048576\n  max.request.size=4194304\nconsumerConfig: |\n  auto.offset.reset=earliest\n  enable.auto.commit=false\n  max.partition.fetch.bytes=10485760\n",
    );
    let ran = run(&with_sets(
        &short("2000", 2),
        &["--driver", driver.to_str().unwrap()],
    ));
    assert_lossless(&ran);
    let manifest = ran.manifest();
    let d = &manifest["driver"];
    assert_eq!(
        d["producer_config"]["message.max.bytes"], "4194304",
        "{d:#}"
    );
    assert!(d["producer_config"].get("max.request.size").is_none());
    assert_eq!(d["common_config"]["request.timeout.ms"], "900000");
    let notes = manifest["input_notes"].to_string();
    for said in [
        "max.request.size=4194304 is the Java client's name for the largest produce request: passed to librdkafka as message.max.bytes",
        "request.timeout.ms=1200000 is above librdkafka's range for request.timeout.ms (1..900000): clamped to 900000",
    ] {
        assert!(notes.contains(said), "{said}: {notes}");
    }
}

#[test]
fn an_openmessaging_benchmark_driver_file_runs_unchanged_once_the_cluster_can_give_it() {
    let _turn = serial();
    kafka();
    let dir = tempfile::tempdir().unwrap();
    // OMB's Kafka latency settings, in OMB's driver-file format: three replicas and two in
    // sync, which a one-broker cluster cannot give; Java client properties that librdkafka
    // has no use for. No bootstrap.servers: the managed local Kafka.
    let driver = write(
        dir.path(),
        "kafka-latency.yaml",
        "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\nreplicationFactor: 3\ntopicConfig: |\n  min.insync.replicas=2\ncommonConfig: |\n  client.id=omb-test\nproducerConfig: |\n  acks=all\n  linger.ms=1\n  batch.size=131072\n  key.serializer=org.apache.kafka.common.serialization.StringSerializer\nconsumerConfig: |\n  auto.offset.reset=earliest\n  enable.auto.commit=false\n  max.partition.fetch.bytes=10485760\n",
    );
    let driver = driver.to_str().unwrap();
    let refused = run(&with_sets(&short("1000", 2), &["--driver", driver]));
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    for said in [
        "replication_factor 3 needs 3 brokers",
        "has 1",
        "NOT_ENOUGH_REPLICAS",
        "--set replication_factor=1 --set topic_config.min.insync.replicas=1",
    ] {
        assert!(refused.stderr.contains(said), "{said}: {}", refused.stderr);
    }
    assert!(
        !refused.folder.exists(),
        "nothing is created before the check"
    );
    // OMB's own name for the replication factor, brokerbench's for the topic property.
    let mut sets = short("1000", 2);
    sets.push("replicationFactor=1".into());
    sets.push("topic_config.min.insync.replicas=1".into());
    let ran = run(&with_sets(&sets, &["--driver", driver]));
    assert_lossless(&ran);
    let d = &ran.manifest()["driver"];
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

#[test]
fn messages_a_consumer_has_not_reached_when_the_drain_ends_are_unconsumed_not_lost() {
    let _turn = serial();
    kafka();
    // The backlog by construction, not by a slow machine: the broker holds each fetch until
    // 100 MB wait or 30 s pass, so the consumer receives nothing in this 4 s run, and the
    // run's own topic holds every acknowledged message beyond its position when the drain
    // ends. (The case: OMB's max-rate workload, 1.47M msg/s produced, 225K consumed,
    // reported as millions lost.)
    let mut sets = short("5000", 2);
    sets[3] = "drain_timeout=1s".into();
    sets.extend(
        [
            "unique_topics=true",
            "delete_topics=true",
            "consumer_config.fetch.min.bytes=100000000",
            "consumer_config.fetch.wait.max.ms=30000",
        ]
        .map(String::from),
    );
    let run = run(&with_sets(&sets, &[]));
    assert_eq!(run.code, 0, "lossless: {}", run.stderr);
    let s = run.summary();
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    let integrity = &s["integrity"];
    assert!(acknowledged >= 10_000, "{s:#}");
    assert_eq!(s["total"]["received"], 0, "{s:#}");
    assert_eq!(integrity["lost"], 0, "{s:#}");
    assert_eq!(integrity["unconsumed"], acknowledged, "{s:#}");
    assert!(
        integrity["unconsumed_evidence"]
            .as_str()
            .is_some_and(|e| e.contains("high watermark")),
        "{s:#}"
    );
    assert!(
        s["notes"]
            .to_string()
            .contains("not consumed yet, not lost"),
        "{s:#}"
    );
}
