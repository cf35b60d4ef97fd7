//! Input refused before anything starts, each naming the file or flag, the field and the
//! fix: no broker is reached. (`broker` and study refusals of cluster sizes: clusters.rs.)

use crate::common::*;

const QUICKSTART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/quickstart.yaml");

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

#[test]
fn a_bad_metrics_block_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let driver = write(
        dir.path(),
        "bad.yaml",
        "driver: kafka\nbroker_metrics:\n  url: https://127.0.0.1:1/metrics\n  ca_file: missing-ca.pem\n",
    );
    let output = brokerbench()
        .args(["validate", driver.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.yaml")
            && stderr.contains("broker_metrics.ca_file")
            && stderr.contains("missing-ca.pem"),
        "{stderr}"
    );
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
            // A broker of its own (that does not answer): the share is checked against the
            // driver's subscriptions once the driver is built, and for the managed broker that
            // is after its start.
            &[
                "--shard",
                "1/2",
                "--run-id",
                "x",
                "--coordinator",
                "127.0.0.1:1",
                "--set",
                "bootstrap_servers=127.0.0.1:1",
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
fn a_dashboard_on_an_address_beyond_loopback_must_be_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let refused = brokerbench()
        .args(["run", QUICKSTART, "--dashboard=0.0.0.0:0", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--dashboard=0.0.0.0:0") && said.contains("--dashboard-public"),
        "{said}"
    );
    assert!(!out.exists(), "nothing started");
}

/// The fault studies need three-node clusters of each family and a minute per run: here every
/// run is planned and checked (`--dry-run`); tests/clusters.rs runs their faults on clusters.
#[test]
fn the_fault_studies_plan_every_run() {
    for (name, runs) in [("durability-kafka", 12), ("failover", 9)] {
        let output = brokerbench()
            .arg("study")
            .arg(format!(
                "{}/studies/{name}.yaml",
                env!("CARGO_MANIFEST_DIR")
            ))
            .arg("--dry-run")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains(&format!("{runs} runs")), "{name}: {stdout}");
        assert!(stdout.contains("node: leader"), "{name}: {stdout}");
    }
}
