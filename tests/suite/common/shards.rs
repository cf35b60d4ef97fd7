//! One run in shards: the shard processes started together, their folders merged, and the
//! merge checked against the shards' own counts and histograms.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use brokerbench_report::html::read_hlog;
use hdrhistogram::Histogram;
use serde_json::Value;

use super::*;

pub fn free_port() -> u16 {
    brokerbench_brokers::test_support::free_port_layout(&[0])
}

/// Starts shard `index` of `count` with results in `dir/shard-INDEX`.
pub fn start_shard(dir: &Path, index: u32, count: u32, common: &[String]) -> Child {
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
pub fn finish(child: Child, began: Instant, limit: Duration) -> (i32, String, Duration) {
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
pub fn succeeds(command: &mut assert_cmd::Command) -> String {
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

pub fn json(path: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

pub fn window_histogram(folder: &Path, tag: &str) -> Histogram<u64> {
    read_hlog(&folder.join("window.hlog"))
        .unwrap()
        .into_iter()
        .find(|(t, _, _)| t == tag)
        .map(|(_, _, h)| h)
        .unwrap_or_else(|| panic!("{tag} in {}/window.hlog", folder.display()))
}

/// Runs `count` shards of a workload at once, merges them, and checks the merge against the
/// shards' own files: counts summed, the ledger joined, histograms added exactly.
pub fn shards_merge_exactly(count: u32, sets: &[&str], driver: Option<&str>) -> Value {
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
    let ended: Vec<(i32, String)> = children
        .into_iter()
        .map(|child| {
            let (code, stderr, _) = finish(child, began, Duration::from_secs(120));
            (code, stderr)
        })
        .collect();
    let said: Vec<String> = ended
        .iter()
        .enumerate()
        .map(|(i, (code, stderr))| format!("shard {i} exited {code}: {stderr}"))
        .collect();
    assert!(
        ended.iter().all(|(code, _)| *code == 0),
        "{}",
        said.join("\n")
    );
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
