//! Redis Streams against the real managed Redis (Debian's redis-server): the conformance
//! suite, and what is Redis's own. The server's own counts are read with Debian's redis-cli.

use crate::common::*;
use crate::conformance::*;

/// The bundled Redis driver file.
const REDIS_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers/redis.yaml");

pub static SUBJECT: Subject = Subject {
    family: "redis",
    counted: Counted {
        seconds: 2,
        sets: &["delete_streams=false"],
        prefix: "stream_prefix={prefix}",
        exact: true,
        publish_slack_us: Some(300),
        stored: stored_every_message,
        leftovers: Some(streams),
    },
    topology: Topology {
        sets: &[
            "partitions_per_topic=3",
            "subscriptions_per_topic=2",
            "consumers_per_topic=2",
            "delete_streams=false",
            "stream_prefix={prefix}",
        ],
        stored: Some(a_stream_per_partition_with_both_groups),
    },
    omb: omb_driver_files,
    unreachable: &["redis_url=redis://bench:hunter2@127.0.0.1:1"],
    bad_fields: &[
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
    ],
    // Each command written and synced to the append-only file before the server replies.
    kill: Kill {
        sets: &["appendfsync=always"],
        prepare: Some(rewrite_append_only_file),
        may_lose: MayLose::Nothing,
        check: None,
    },
    tls: Some(Tls {
        secret: Secret::InUrl("redis_url: rediss://"),
        shown: "rediss://brokerbench:***@",
        wrong_secret: &[
            "refused the credentials",
            "WRONGPASS",
            "user 'brokerbench'",
            "redis_url",
        ],
        untrusted: &["UnknownIssuer", "ca_file"],
    }),
    // One entry a read has the consumer make a round trip per message while the producer, at
    // the maximum rate, keeps up to 1000 XADDs in flight: pipelined sends outpace
    // one-at-a-time reads on any machine.
    unconsumed: Some(Unconsumed {
        rate: "max",
        sets: &["message_size=100B", "read_count=1"],
        evidence: "XINFO STREAM",
        exits_clean: true,
        check: None,
    }),
    // Each XADD trims its stream to 100 entries while the consumers wait for 5,000.
    dropped: Some(Dropped {
        rate: "5000",
        seconds: 2,
        limit: &[
            "max_len=100",
        ],
        backlog: "500KB",
        note: None,
    }),
};

conformance!(super::SUBJECT, tls, unconsumed, dropped);

/// Starts the managed Redis once for the suite, with TLS and a user (`broker up redis --tls`:
/// clients that give no login connect as Redis's default user on the plain port, so every
/// other test runs against it unchanged); returns its port.
fn redis() -> u16 {
    family_port("redis")
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

/// The kept run's stream holds every acknowledged message (the whole run's, warm-up too),
/// and the subscription's group read and acknowledged them all.
fn stored_every_message(prefix: &str, _run: &Run, s: &serde_json::Value) {
    let kept = streams(prefix);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let sent = s["integrity"]["whole_run"]["acknowledged"]
        .as_u64()
        .unwrap_or_else(|| s["total"]["acknowledged"].as_u64().unwrap());
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
    assert!(
        s["broker_metrics"]["means"]["used_memory_bytes"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{:#}",
        s["broker_metrics"]
    );
    cli(&["DEL", &kept[0]]);
}

/// One stream per partition, each with both groups.
fn a_stream_per_partition_with_both_groups(prefix: &str, _run: &Run, _s: &serde_json::Value) {
    let run_streams = streams(prefix);
    assert_eq!(run_streams.len(), 3, "{run_streams:?}");
    for stream in &run_streams {
        let groups = cli(&["XINFO", "GROUPS", stream]);
        assert_eq!(groups.as_array().unwrap().len(), 2, "{groups:#}");
        assert!(cli(&["XLEN", stream]).as_u64().unwrap() > 0, "{stream}");
        cli(&["DEL", stream]);
    }
}

/// OMB's driver-redis/redis.yaml, with the managed server's port (6379 unless moved).
fn omb_driver_files(port: u16) -> Vec<OmbFile> {
    vec![OmbFile {
        name: "redis.yaml",
        text: format!("name: Redis\ndriverClass: io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver\n\n# Redis client-specific configuration\nredisPort: {port}\nredisHost: 127.0.0.1\njedisPoolMaxTotal: 8\njedisPoolMaxIdle: 8\n"),
        sets: Vec::new(),
        note: "OpenMessaging Benchmark Redis driver file",
        expect: Expect::Lossless,
        check: None,
    }]
}

/// A restarted server loads its append-only file before it answers: rewritten first, so that
/// what the tests before the kill wrote (a maximum-rate run's) does not lengthen it. The
/// server may have started a rewrite of its own (its file grew past
/// auto-aof-rewrite-percentage): that one is waited for instead.
fn rewrite_append_only_file() {
    let answer = cli_text(&["BGREWRITEAOF"]);
    assert!(
        answer.contains("rewriting started")
            || answer.contains("rewriting scheduled")
            || answer.contains("already in progress"),
        "{answer}"
    );
    // A rewrite of the few megabytes earlier tests leave took well under a second here; 60 s
    // is for a host with a core kept busy and a slow disk.
    let rewritten = wait_until(std::time::Duration::from_secs(60), || {
        let info = cli_text(&["INFO", "persistence"]);
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    });
    assert!(
        rewritten,
        "the append-only file was not rewritten within 60 s"
    );
}

/// The managed server has no password: one given on the plain port is refused at login.
#[test]
fn a_password_the_plain_port_does_not_take_is_refused_naming_redis_url() {
    let _turn = serial();
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
fn the_runs_persistence_is_recorded_and_appendfsync_always_is_put_back_after() {
    let _turn = serial();
    redis();
    // The append-only file off before the run: the run turns it on, and off again after.
    cli(&["CONFIG", "SET", "appendonly", "no"]);
    let before = cli(&["CONFIG", "GET", "append*"]);
    let run = family_run(
        "redis",
        REDIS_DRIVER,
        &short_with("1000", 1, &["appendfsync=always"]),
    );
    let after = cli(&["CONFIG", "GET", "append*"]);
    cli(&["CONFIG", "SET", "appendonly", "yes"]);
    assert!(
        before.to_string().contains("\"appendonly\":\"no\""),
        "{before}"
    );
    assert_eq!(after, before);
    assert_lossless(&run);
    let version = run.broker_version();
    assert!(
        version.contains("appendonly yes, appendfsync always"),
        "{version}"
    );
    // A run that sets nothing records the managed server's own: 7.x, fsync every second.
    let plain = family_run("redis", REDIS_DRIVER, &short_with("1000", 1, &[]));
    assert_lossless(&plain);
    let version = plain.broker_version();
    assert!(
        version.starts_with("7.") && version.contains("appendfsync everysec"),
        "{version}"
    );
}
