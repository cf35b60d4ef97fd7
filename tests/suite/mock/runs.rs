//! Runs on the in-memory mock family where the broker is only a vehicle: the result files,
//! payloads, the closed loop, a stall's latency, OMB's workload files, a sampled process
//! that goes away.

use crate::common::*;

/// `short` settings on the mock, without a warm-up: the mock has no consumer group to join
/// and no broker to warm, so every second of a run is measured.
fn on_mock(rate: &str, seconds: u32) -> Vec<String> {
    let mut sets = short(rate, seconds);
    sets.retain(|s| !s.starts_with("warmup="));
    sets.extend(["driver=mock".into(), "warmup=0s".into()]);
    sets
}

#[test]
fn a_run_is_lossless_and_writes_every_result_file() {
    let _turn = serial();
    let sets = on_mock("5000", 3);
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
    assert_eq!(run.manifest()["broker"]["managed"], false);
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
fn file_replay_from_ram_and_from_disk() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sensor.tsv");
    brokerbench()
        .args(["data", "generate", "--records", "500", "--out"])
        .arg(&data)
        .assert()
        .success();
    for read_in_ram in ["true", "false"] {
        let mut sets = on_mock("2000", 2);
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
    let mut sets = on_mock("2000", 2);
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
    // Produce only: at max rate the producer outruns one consumer many times over, and what
    // is unread when the drain ends would count as lost.
    let mut sets = on_mock("max", 3);
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
fn a_one_second_stall_of_the_broker_shows_in_publish_p99_and_max() {
    let _turn = serial();
    // 2 s of measurement, then the broker acknowledges nothing for 1 s.
    let mut sets = on_mock("2000", 6);
    sets.push("stall={at: 2s, for: 1s}".into());
    let run = run(&with_sets(&sets, &[]));
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

#[test]
fn an_openmessaging_benchmark_workload_file_runs_unchanged() {
    let _turn = serial();
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
        "--set",
        "driver=mock",
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
    // What was due in the window was sent and acknowledged, or counted as behind the
    // schedule (a busy host starts the producers late): 8,705 and 295 in one CI rehearsal.
    let behind = s["errors"]["not_sent_behind_schedule"]
        .as_u64()
        .unwrap_or(0);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    assert_eq!(acknowledged + behind, 9000, "{s:#}");
    assert_eq!(s["total"]["sent"].as_u64(), Some(acknowledged), "{s:#}");
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
fn a_broker_pid_that_disappears_mid_run_is_reported_not_fatal() {
    let _turn = serial();
    let mut stand_in = std::process::Command::new("sleep")
        .arg("2")
        .spawn()
        .unwrap();
    let pid = stand_in.id().to_string();
    let reaper = std::thread::spawn(move || stand_in.wait());
    let sets = on_mock("1000", 4);
    let run = run(&with_sets(&sets, &["--broker-pid", &pid]));
    reaper.join().unwrap().unwrap();
    let s = assert_lossless(&run);
    assert!(
        s["resources"]["broker"]["lost_at_ns"].as_u64().is_some(),
        "{:#}",
        s["resources"]
    );
    assert!(
        s["notes"].to_string().contains("stopped running"),
        "{:#}",
        s["notes"]
    );
}
