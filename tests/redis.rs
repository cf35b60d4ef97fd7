//! Integration tests against the real managed Redis (Debian's redis-server, started once by
//! this binary), the same kinds the other families have; the server's own count is read with
//! Debian's redis-cli.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

/// The bundled Redis driver file.
const REDIS_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers/redis.yaml");

/// Starts the managed Redis once per test binary (idempotent), with TLS and a user (`broker up
/// redis --tls`: clients that give no login connect as Redis's default user on the plain
/// port, so every other test runs against it unchanged); returns its port.
fn redis() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let text = up_with_tls("redis");
        assert!(text.contains("TLS:  rediss://127.0.0.1:"), "{text}");
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("127.0.0.1:"))
            .and_then(|p| p.parse().ok())
            .expect("broker up prints the address")
    })
}

fn redis_run(sets: &[String]) -> Run {
    redis();
    run_driver(REDIS_DRIVER, sets)
}

/// `redis-cli --json` on the managed server: its answer to `args`.
fn cli(args: &[&str]) -> serde_json::Value {
    let text = cli_text(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// What `redis-cli --json` printed for `args` (INFO's answer is text, not JSON).
fn cli_text(args: &[&str]) -> String {
    let output = std::process::Command::new("redis-cli")
        .args(["--json", "-p", &redis().to_string()])
        .args(args)
        .output()
        .expect("running redis-cli (Debian's redis-tools)");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The server's streams whose names contain `part`.
fn streams(part: &str) -> Vec<String> {
    let keys = cli(&["KEYS", &format!("*{part}*")]);
    let mut names: Vec<String> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn a_run_is_lossless_its_stream_took_every_message_its_group_acknowledged_them_and_is_deleted_after(
) {
    let _turn = serial();
    let prefix = format!("kept{}", std::process::id());
    let run = redis_run(&short_with(
        "2000",
        2,
        &["delete_streams=false", &format!("stream_prefix={prefix}")],
    ));
    let s = assert_lossless(&run);
    assert_publish_not_inflated_by_the_gap(&s, 300);
    assert_eq!(s["driver"], "redis");
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    assert!(
        s["latency"]["publish"]["count"].as_u64().unwrap() > 3000,
        "replies give publish latency: {s:#}"
    );
    // The server's own count (its XADD calls, from INFO commandstats) is exactly what was
    // acknowledged, and its rate over the window agrees.
    let broker = &s["broker_metrics"];
    assert_eq!(broker["source"], "redis", "{broker:#}");
    assert_eq!(
        broker["messages_in"], s["total"]["acknowledged"],
        "{broker:#}"
    );
    assert_broker_rate_agrees(&run, &s, "messages_in_per_second", "acknowledged_per_s");
    assert!(
        broker["means"]["used_memory_bytes"].as_f64().unwrap() > 0.0,
        "{broker:#}"
    );
    let manifest = run.manifest();
    assert_eq!(manifest["broker"]["managed"], true);
    let version = manifest["broker"]["version"].as_str().unwrap();
    assert!(
        version.starts_with("7.") && version.contains("appendfsync everysec"),
        "{version}"
    );
    // The server's own count: the stream holds every acknowledged message (the whole run's,
    // warm-up too), and the subscription's group read and acknowledged them all.
    let kept = streams(&prefix);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let sent = s["integrity"]["whole_run"]["acknowledged"]
        .as_u64()
        .unwrap_or(acknowledged);
    assert_eq!(cli(&["XLEN", &kept[0]]).as_u64(), Some(sent), "{s:#}");
    let groups = cli(&["XINFO", "GROUPS", &kept[0]]);
    let group = &groups[0];
    assert_eq!(group["name"], "s0", "{groups:#}");
    assert_eq!(group["entries-read"].as_u64(), Some(sent), "{groups:#}");
    assert_eq!(
        (group["pending"].as_u64(), group["lag"].as_u64()),
        (Some(0), Some(0)),
        "{groups:#}"
    );
    cli(&["DEL", &kept[0]]);

    // By default the run's streams are deleted afterwards.
    let prefix = format!("gone{}", std::process::id());
    let run = redis_run(&short_with(
        "1000",
        1,
        &[&format!("stream_prefix={prefix}")],
    ));
    assert_lossless(&run);
    assert_eq!(streams(&prefix), Vec::<String>::new());
}

#[test]
fn three_partitions_and_two_subscriptions_of_two_members_each_receive_every_message_once() {
    let _turn = serial();
    let prefix = format!("parts{}", std::process::id());
    let run = redis_run(&short_with(
        "2000",
        2,
        &[
            "partitions_per_topic=3",
            "subscriptions_per_topic=2",
            "consumers_per_topic=2",
            "delete_streams=false",
            &format!("stream_prefix={prefix}"),
        ],
    ));
    let s = assert_lossless_copies(&run, 2);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    let each = received_per_consumer(&s);
    assert_eq!(each.len(), 4, "{s:#}");
    assert_eq!(each.iter().sum::<u64>(), 2 * acknowledged, "{s:#}");
    assert!(
        each.iter().all(|&n| n > 0),
        "every member had a share: {each:?}"
    );
    // One stream per partition, each with both groups.
    let run_streams = streams(&prefix);
    assert_eq!(run_streams.len(), 3, "{run_streams:?}");
    for stream in &run_streams {
        let groups = cli(&["XINFO", "GROUPS", stream]);
        assert_eq!(groups.as_array().unwrap().len(), 2, "{groups:#}");
        assert!(cli(&["XLEN", stream]).as_u64().unwrap() > 0, "{stream}");
        cli(&["DEL", stream]);
    }
}

#[test]
fn a_length_limit_counts_what_the_server_trimmed_as_dropped_by_policy_not_lost() {
    let _turn = serial();
    // Consumers stop reading until 5,000 messages wait for them, while each XADD trims its
    // stream to 100 entries: about 4,900 acknowledged messages are discarded by the server
    // whatever the machine's speed (at least 4,000 asserted).
    let run = redis_run(&short_with(
        "5000",
        2,
        &[
            "max_len=100",
            "message_size=100B",
            "backlog.size=500KB",
            "backlog.drain_ratio=0",
            "drain_timeout=3s",
        ],
    ));
    assert_dropped_by_policy(&run);
}

#[test]
fn what_a_group_has_not_read_when_the_drain_ends_is_unconsumed_not_lost() {
    let _turn = serial();
    // One entry a read has the consumer make a round trip per message while the producer, at
    // the maximum rate, keeps up to 1000 XADDs in flight: pipelined sends outpace one-at-a-time
    // reads on any machine; the count checked is exact whatever the speeds.
    let run = redis_run(&short_with(
        "max",
        2,
        &["message_size=100B", "drain_timeout=1s", "read_count=1"],
    ));
    let s = run.summary();
    assert_eq!(run.code, 0, "lossless: {}\n{s:#}", run.stderr);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    let received = s["total"]["received"].as_u64().unwrap();
    let integrity = &s["integrity"];
    assert!(received < acknowledged, "{s:#}");
    assert_eq!(integrity["lost"], 0, "{s:#}");
    assert_eq!(
        integrity["unconsumed"].as_u64(),
        Some(acknowledged - received),
        "{s:#}"
    );
    assert!(
        integrity["unconsumed_evidence"]
            .as_str()
            .is_some_and(|e| e.contains("XINFO STREAM")),
        "{s:#}"
    );
}

#[test]
fn an_unreachable_server_exits_3_fast_and_a_refused_password_names_redis_url() {
    let _turn = serial();
    let started = Instant::now();
    let run = run(&[
        "--driver",
        REDIS_DRIVER,
        "--set",
        "redis_url=redis://bench:hunter2@127.0.0.1:1",
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        run.stderr.contains("127.0.0.1:1") && run.stderr.contains("brokerbench broker up redis"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    // The managed server has no password: one given is refused at login.
    let driver = format!(
        "driver: redis\nredis_url: redis://bench:hunter2@127.0.0.1:{}\n",
        redis()
    );
    assert_refused_at_once(
        &driver,
        &[
            "refused the credentials",
            "WRONGPASS",
            "user 'bench'",
            "redis_url",
        ],
        &["hunter2"],
    );
}

#[test]
fn bad_driver_fields_exit_2_naming_the_field() {
    for (set, says) in [
        ("read_cout=5", "did you mean `read_count`?"),
        ("stream_prefix=a b", "field `stream_prefix`"),
        ("max_len=0", "field `max_len`"),
        ("read_count=0", "field `read_count`"),
        ("redis_url=tcp://h:1", "redis://host:port"),
        ("appendfsync=sometimes", "appendfsync"),
        (
            "broker_metrics.url=http://127.0.0.1:9/metrics",
            "field `broker_metrics.url`: 'http://127.0.0.1:9/metrics': the URL must start with redis:// or rediss://",
        ),
    ] {
        let run = run(&["--driver", REDIS_DRIVER, "--set", set]);
        assert_eq!(run.code, 2, "{set}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{set}: {}", run.stderr);
    }
}

#[test]
fn an_openmessaging_benchmark_redis_driver_file_runs_unchanged() {
    let _turn = serial();
    let port = redis();
    let dir = tempfile::tempdir().unwrap();
    // OMB's driver-redis/redis.yaml, with the managed server's port (6379 unless moved).
    let driver = write(
        dir.path(),
        "redis.yaml",
        &format!("name: Redis\ndriverClass: io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver\n\n# Redis client-specific configuration\nredisPort: {port}\nredisHost: 127.0.0.1\njedisPoolMaxTotal: 8\njedisPoolMaxIdle: 8\n"),
    );
    let mut args = vec!["--driver", driver.to_str().unwrap()];
    let sets = short("1000", 1);
    args.extend(with_sets(&sets, &[]));
    let omb = run(&args);
    assert_lossless(&omb);
    let notes = omb.manifest()["input_notes"].to_string();
    assert!(
        notes.contains("OpenMessaging Benchmark Redis driver file"),
        "{notes}"
    );
}

#[test]
fn appendfsync_always_holds_for_the_run_is_recorded_and_is_put_back() {
    let _turn = serial();
    redis();
    // The append-only file off before the run: the run turns it on, and off again after.
    cli(&["CONFIG", "SET", "appendonly", "no"]);
    let before = cli(&["CONFIG", "GET", "append*"]);
    let run = redis_run(&short_with("1000", 1, &["appendfsync=always"]));
    let after = cli(&["CONFIG", "GET", "append*"]);
    cli(&["CONFIG", "SET", "appendonly", "yes"]);
    assert!(
        before.to_string().contains("\"appendonly\":\"no\""),
        "{before}"
    );
    assert_eq!(after, before);
    assert_lossless(&run);
    let version = run.manifest()["broker"]["version"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        version.contains("appendonly yes, appendfsync always"),
        "{version}"
    );
}

#[test]
fn a_killed_server_started_again_loses_no_acknowledged_message_and_the_clients_come_back() {
    let _turn = serial();
    redis();
    // A restarted server loads its append-only file before it answers: rewritten first, so
    // that what the tests before this one wrote (a maximum-rate run's) does not lengthen it.
    // The server may have started a rewrite of its own (its file grew past
    // auto-aof-rewrite-percentage): that one is waited for instead.
    let answer = cli_text(&["BGREWRITEAOF"]);
    assert!(
        answer.contains("rewriting started")
            || answer.contains("rewriting scheduled")
            || answer.contains("already in progress"),
        "{answer}"
    );
    let rewritten = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        let info = cli_text(&["INFO", "persistence"]);
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    });
    assert!(
        rewritten,
        "the append-only file was not rewritten within 10 s"
    );
    let mut args = vec!["--driver", REDIS_DRIVER];
    // Each command written and synced to the append-only file before the server replies.
    let sets = short_with("1000", 10, &["appendfsync=always"]);
    args.extend(with_sets(
        &sets,
        &["--fault", "at=2s,action=kill,node=1,restart_after=1s"],
    ));
    let run = run(&args);
    // Entries delivered and not acknowledged when the connection went are read again:
    // duplicates, so the run may end NOT CLEAN (1), never lossy.
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let s = run.summary();
    assert_eq!(
        s["integrity"]["lost"], 0,
        "written before each reply: {s:#}"
    );
    let kill = &s["faults"][0];
    assert!(kill["restarted_pid"].as_u64().is_some(), "{kill:#}");
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
        .args(["broker", "status", "redis"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
}

/// The driver file `broker status redis --driver-file` prints for the TLS port, and the
/// password it holds.
fn tls_driver() -> (String, String) {
    redis();
    tls_driver_file("redis", "redis_url: rediss://")
}

#[test]
fn a_run_over_tls_as_the_user_is_clean_and_keeps_secrets() {
    let _turn = serial();
    let (driver, password) = tls_driver();
    assert_tls_run_keeps_secrets("redis", &driver, &password, "rediss://brokerbench:***@");
}

#[test]
fn a_wrong_password_or_an_untrusted_certificate_is_refused_at_once_naming_what_to_fix() {
    let _turn = serial();
    let (driver, password) = tls_driver();
    let says = [
        "refused the credentials",
        "WRONGPASS",
        "user 'brokerbench'",
        "redis_url",
    ];
    assert_tls_refusals("redis", &driver, &password, &says);
}
