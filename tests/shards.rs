//! One workload from several processes (`run --shard I/N`), merged exactly (`merge`), against
//! the real managed Kafka, RabbitMQ and NATS; the Kubernetes manifests checked offline.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use brokerbench_report::html::read_hlog;
use common::*;
use hdrhistogram::Histogram;
use serde_json::Value;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts shard `index` of `count` with results in `dir/shard-INDEX`.
fn start_shard(dir: &Path, index: u32, count: u32, common: &[String]) -> Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("brokerbench"))
        .arg("run")
        .args(common)
        .args(["--shard", &format!("{index}/{count}"), "--quiet", "--out"])
        .arg(dir.join(format!("shard-{index}")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a shard, at most `limit`; (exit code, stderr, how long it took from `began`).
fn finish(child: Child, began: Instant, limit: Duration) -> (i32, String, Duration) {
    let pid = child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(limit);
        // SAFETY: sends a signal to a child process of this test, if it is still there.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let output = child.wait_with_output().unwrap();
    drop(killer);
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        began.elapsed(),
    )
}

/// Runs a command that must exit 0; its stdout.
fn succeeds(command: &mut assert_cmd::Command) -> String {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

fn window_histogram(folder: &Path, tag: &str) -> Histogram<u64> {
    read_hlog(&folder.join("window.hlog"))
        .unwrap()
        .into_iter()
        .find(|(t, _, _)| t == tag)
        .map(|(_, _, h)| h)
        .unwrap_or_else(|| panic!("{tag} in {}/window.hlog", folder.display()))
}

/// Runs `count` shards of a workload at once, merges them, and checks the merge against the
/// shards' own files: counts summed, the ledger joined, histograms added exactly.
fn shards_merge_exactly(count: u32, sets: &[&str], driver: Option<&str>) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let run_id = format!("t{}", std::process::id());
    let mut common: Vec<String> = vec![
        "--run-id".into(),
        run_id.clone(),
        "--coordinator".into(),
        format!("127.0.0.1:{}", free_port()),
    ];
    if let Some(driver) = driver {
        common.extend(["--driver".into(), driver.into()]);
    }
    for s in sets {
        common.extend(["--set".into(), s.to_string()]);
    }
    let began = Instant::now();
    let lateness = WakeupLateness::start();
    let children: Vec<Child> = (0..count)
        .map(|i| start_shard(dir.path(), i, count, &common))
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let (code, stderr, _) = finish(child, began, Duration::from_secs(120));
        assert_eq!(code, 0, "shard {i}: {stderr}");
    }
    let late = lateness.worst();
    let folders: Vec<PathBuf> = (0..count)
        .map(|i| dir.path().join(format!("shard-{i}")))
        .collect();
    let merged = dir.path().join("merged");
    let stdout = succeeds(
        brokerbench()
            .arg("merge")
            .args(&folders)
            .arg("-o")
            .arg(&merged),
    );
    assert!(
        stdout.contains("(lossless)") && stdout.contains("shards "),
        "{stdout}"
    );
    let summary = json(&merged.join("summary.json"));
    let shards: Vec<Value> = folders
        .iter()
        .map(|f| json(&f.join("summary.json")))
        .collect();
    let shard_files: Vec<Value> = folders
        .iter()
        .map(|f| json(&f.join("shard.json")))
        .collect();

    // Counts are the shards' sums; nothing lost, each message received once.
    for scope in ["window", "total"] {
        for field in ["sent", "acknowledged", "received", "bytes_acknowledged"] {
            let sum: u64 = shards
                .iter()
                .map(|s| s[scope][field].as_u64().unwrap())
                .sum();
            assert_eq!(
                summary[scope][field].as_u64().unwrap(),
                sum,
                "{scope}.{field}"
            );
        }
    }
    let total = &summary["total"];
    assert!(total["sent"].as_u64().unwrap() > 1000, "{summary:#}");
    assert_eq!(total["sent"], total["acknowledged"], "{summary:#}");
    assert_eq!(total["acknowledged"], total["received"], "{summary:#}");
    assert_eq!(summary["integrity"]["checked"], true);
    for field in [
        "lost",
        "duplicated",
        "out_of_order",
        "unacknowledged",
        "received_unacknowledged",
    ] {
        assert_eq!(summary["integrity"][field], 0, "{field}: {summary:#}");
    }
    // A shard alone cannot say so: its consumers read other shards' messages.
    for (i, s) in shards.iter().enumerate() {
        assert_eq!(s["integrity"]["checked"], false, "shard {i}");
    }
    // Every shard's consumers received some other shard's producers' messages (the join
    // is needed), and each producer ran on exactly one shard.
    let mut producers: Vec<u64> = Vec::new();
    for (i, folder) in folders.iter().enumerate() {
        let ledger = json(&folder.join("ledger.json"));
        let own: Vec<u64> = ledger["producers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_u64().unwrap())
            .collect();
        producers.extend(&own);
        let from_others = ledger["consumers"].as_array().unwrap().iter().any(|c| {
            c["received"]
                .as_object()
                .unwrap()
                .keys()
                .any(|p| !own.contains(&p.parse().unwrap()))
        });
        assert!(
            from_others,
            "shard {i} received only its own messages: {ledger}"
        );
    }
    producers.sort_unstable();
    let expected: Vec<u64> = (0..producers.len() as u64).collect();
    assert_eq!(producers, expected);

    // Histograms: the merge's are the sum of the shards' (counts and percentiles).
    for (tag, field) in [("publish", "publish"), ("end_to_end", "end_to_end")] {
        let mut sum = window_histogram(&folders[0], tag);
        for f in &folders[1..] {
            sum.add(window_histogram(f, tag)).unwrap();
        }
        let merged_h = window_histogram(&merged, tag);
        assert_eq!(merged_h.len(), sum.len(), "{tag}");
        let shard_counts: u64 = shards
            .iter()
            .map(|s| s["latency"][field]["count"].as_u64().unwrap())
            .sum();
        assert_eq!(merged_h.len(), shard_counts, "{tag}");
        let latency = &summary["latency"][field];
        assert_eq!(latency["count"].as_u64().unwrap(), sum.len());
        for (key, q) in [("p50_ns", 0.5), ("p99_ns", 0.99), ("p9999_ns", 0.9999)] {
            assert_eq!(
                latency[key].as_u64().unwrap(),
                sum.value_at_quantile(q),
                "{tag} {key}"
            );
        }
        assert_eq!(latency["max_ns"].as_u64().unwrap(), sum.max());
    }
    // Per second too: publish.hlog's intervals added shard by shard.
    let per_second = |f: &Path| -> Vec<u64> {
        read_hlog(&f.join("publish.hlog"))
            .unwrap()
            .iter()
            .map(|(_, _, h)| h.len())
            .collect()
    };
    let merged_seconds = per_second(&merged);
    let mut summed = vec![0u64; merged_seconds.len()];
    for f in &folders {
        for (k, n) in per_second(f).into_iter().enumerate() {
            summed[k] += n;
        }
    }
    assert_eq!(merged_seconds, summed);

    // The barrier: measurement windows start together (on shard 0's clock).
    let starts: Vec<i64> = shard_files
        .iter()
        .map(|s| s["window_start_ns"].as_i64().unwrap() + s["clock"]["offset_ns"].as_i64().unwrap())
        .collect();
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    // Each shard wakes for its start on its own: a busy host wakes one of them late.
    assert!(
        spread < 5_000_000 + late.as_nanos() as i64,
        "windows start {spread} ns apart; the host woke threads up to {late:?} late"
    );

    // The shards table, and a report a browser can open.
    let table = std::fs::read_to_string(merged.join("shards.csv")).unwrap();
    assert_eq!(table.lines().count(), 1 + count as usize, "{table}");
    let report = std::fs::read_to_string(merged.join("report.html")).unwrap();
    assert!(report.contains("<h2>Shards"), "the report shows the shards");
    assert!(merged.join("omb-result.json").exists());

    // Merging needs every shard, once, of one run.
    let refused = brokerbench()
        .arg("merge")
        .args(&folders[1..])
        .arg("-o")
        .arg(dir.path().join("partial"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the folders of shard 0 are missing"),
        "{stderr}"
    );
    let not_a_shard = brokerbench()
        .arg("merge")
        .arg(&merged)
        .args(&folders)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&not_a_shard.stderr);
    assert_eq!(not_a_shard.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no shard folders"), "{stderr}");
    // A results volume: the folder that holds them is enough.
    succeeds(
        brokerbench()
            .arg("merge")
            .arg(dir.path())
            .arg("-o")
            .arg(dir.path().join("again")),
    );
    assert_eq!(
        json(&dir.path().join("again/summary.json"))["total"],
        summary["total"]
    );
    summary
}

#[test]
fn kafka_shards_merge_exactly() {
    let _turn = serial();
    kafka();
    shards_merge_exactly(
        2,
        &[
            "partitions_per_topic=2",
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "rate=4000",
            "warmup=1s",
            "duration=2s",
        ],
        None,
    );
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

#[test]
fn nats_shards_merge_exactly() {
    let _turn = serial();
    nats();
    shards_merge_exactly(
        2,
        &[
            "partitions_per_topic=2",
            "producers_per_topic=2",
            "consumers_per_topic=2",
            "rate=2000",
            "warmup=1s",
            "duration=2s",
        ],
        Some(NATS_DRIVER),
    );
}

#[test]
fn a_shard_that_never_arrives_is_named_and_the_others_stop_within_the_timeout() {
    let _turn = serial();
    kafka();
    let dir = tempfile::tempdir().unwrap();
    let common: Vec<String> = [
        "--run-id",
        &format!("m{}", std::process::id()),
        "--coordinator",
        &format!("127.0.0.1:{}", free_port()),
        "--shard-timeout",
        "2s",
        "--set",
        "producers_per_topic=3",
        "--set",
        "rate=300",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let began = Instant::now();
    let children: Vec<Child> = (0..2)
        .map(|i| start_shard(dir.path(), i, 3, &common))
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let (code, stderr, took) = finish(child, began, Duration::from_secs(60));
        assert_eq!(code, 1, "shard {i}: {stderr}");
        assert!(
            stderr.contains("shard 2 of 3 never arrived within 2s"),
            "{stderr}"
        );
        assert!(took < Duration::from_secs(20), "shard {i} took {took:?}");
        let manifest = json(&dir.path().join(format!("shard-{i}/manifest.json")));
        assert_eq!(manifest["status"], "failed");
    }
}

#[test]
fn shard_flags_are_checked_before_anything_starts() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--shard", "0/2", "--coordinator", "127.0.0.1:1"],
            "give every shard the same --run-id",
        ),
        (
            &["--shard", "1/2", "--run-id", "x"],
            "--coordinator HOST:PORT",
        ),
        (
            &["--shard", "2/2", "--run-id", "x"],
            "shards are counted from 0 to 1",
        ),
        (&["--run-id", "a.b"], "--run-id 'a.b'"),
        (
            &[
                "--shard",
                "1/2",
                "--run-id",
                "x",
                "--coordinator",
                "127.0.0.1:1",
            ],
            "this shard would have nothing to do",
        ),
    ];
    for (args, expected) in cases {
        let output = brokerbench()
            .arg("run")
            .args(args)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let output = brokerbench()
        .args(["run", "--shards", "2", "--run-id", "x"])
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("BROKERBENCH_SHARD_INDEX")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("JOB_COMPLETION_INDEX"), "{stderr}");
}

#[test]
fn kubernetes_manifests_are_rendered_as_committed_and_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let stdout = succeeds(
        brokerbench()
            .current_dir(root)
            .args([
                "k8s",
                "render",
                "--shards",
                "4",
                "deploy/kubernetes/scale-out.yaml",
                "deploy/kubernetes/kafka.yaml",
                "-o",
            ])
            .arg(out.path()),
    );
    assert!(stdout.contains("kubectl apply -f"), "{stdout}");
    let committed = root.join("deploy/kubernetes/brokerbench-scale-out");
    let files = files_under(&committed);
    assert_eq!(files.len(), 5, "{files:?}");
    for file in &files {
        let relative = file.strip_prefix(&committed).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join(relative)).unwrap(),
            std::fs::read_to_string(file).unwrap(),
            "{} differs from what `k8s render` writes: render it again",
            relative.display()
        );
    }
    let jobs = std::fs::read_to_string(out.path().join("20-shards.yaml")).unwrap();
    for expected in [
        "completionMode: Indexed",
        "completions: 4",
        "parallelism: 4",
        "clusterIP: None",
        "batch.kubernetes.io/controller-uid",
    ] {
        assert!(jobs.contains(expected), "{expected}: {jobs}");
    }
    // Offline validation against the Kubernetes schemas (scripts/test installs the tool).
    let validate = std::env::var("BROKERBENCH_TEST_KUBERNETES_VALIDATE").unwrap_or_else(|_| {
        panic!("set BROKERBENCH_TEST_KUBERNETES_VALIDATE to kubernetes-validate (scripts/test installs it)")
    });
    let rendered = files_under(out.path());
    let check = std::process::Command::new(&validate)
        .arg("--strict")
        .args(&rendered)
        .output()
        .unwrap_or_else(|e| panic!("{validate}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(check.status.success(), "{text}");
    assert_eq!(text.matches(" passed for resource ").count(), 7, "{text}");
    // A broken manifest is caught: the check can fail.
    let broken = out.path().join("20-shards.yaml");
    std::fs::write(
        &broken,
        jobs.replace("completionMode: Indexed", "completionMode: 7"),
    )
    .unwrap();
    let check = std::process::Command::new(&validate)
        .arg("--strict")
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!check.status.success());

    // A driver file that names no broker cannot be deployed.
    let output = brokerbench()
        .current_dir(root)
        .args([
            "k8s",
            "render",
            "--shards",
            "2",
            "workloads/quickstart.yaml",
            "workloads/drivers/kafka.yaml",
            "-o",
        ])
        .arg(out.path().join("no"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("set `bootstrap_servers`"), "{stderr}");
}
