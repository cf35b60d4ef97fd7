//! Every bundled study in `studies/` runs with `--quick` against the real managed brokers:
//! each cell once (a grid of more than one axis `--cover`ed: every value of every axis at
//! least once), a few seconds each, and the tables come out complete; the two fault studies,
//! on three-node clusters, are planned and checked. The runs do without resource sampling and
//! broker metrics (`--no-monitor`, 10% less time: tests/study.rs and tests/monitoring.rs cover
//! those in studies and runs).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{brokerbench, kafka, link_jvm_distributions, rabbitmq, serial, OwnHome};

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("studies")
        .join(format!("{name}.yaml"))
}

/// Runs a bundled study with --quick; returns its folder and what it printed.
fn run_quick(name: &str) -> (tempfile::TempDir, PathBuf, String) {
    run_quick_with(name, &[])
}

/// `run_quick` with `--set` overrides (they win over --quick's durations).
fn run_quick_with(name: &str, sets: &[&str]) -> (tempfile::TempDir, PathBuf, String) {
    run_quick_in(name, &[], sets, &[])
}

/// `run_quick_with` with more `flags` (`--cover`), in the environment `env` (e.g. a
/// brokerbench home of its own).
fn run_quick_in(
    name: &str,
    flags: &[&str],
    sets: &[&str],
    env: &[(&str, &str)],
) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join(name);
    let output = brokerbench()
        .envs(env.iter().copied())
        .current_dir(dir.path())
        .arg("study")
        .arg(bundled(name))
        .args(["--quick", "--no-monitor"])
        .args(flags)
        .arg("--out")
        .arg(&folder)
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{name}:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (dir, folder, stdout)
}

/// Runs a bundled study with --quick and checks that every planned run completed and was
/// tabled.
fn quick(name: &str, runs: usize) {
    quick_with(name, runs, &[]);
}

/// `quick` with `--set` overrides.
fn quick_with(name: &str, runs: usize, sets: &[&str]) {
    let (_dir, folder, stdout) = run_quick_with(name, sets);
    assert_all_complete(name, &folder, runs, &stdout);
}

/// `quick_with` with `--cover`: every value of every axis at least once, in `runs` cells; the
/// study plans and checks every cell of its grid first.
fn cover_with(name: &str, runs: usize, sets: &[&str]) {
    cover_in(name, runs, sets, &[]);
}

/// `cover_with` in the environment `env`; returns what the study printed.
fn cover_in(name: &str, runs: usize, sets: &[&str], env: &[(&str, &str)]) -> String {
    let (_dir, folder, stdout) = run_quick_in(name, &["--cover"], sets, env);
    assert_all_complete(name, &folder, runs, &stdout);
    assert!(
        stdout.contains(&format!("{runs} runs of {runs} of the")),
        "{name}: {stdout}"
    );
    stdout
}

/// Every one of the `runs` planned runs completed and was tabled.
fn assert_all_complete(name: &str, folder: &Path, runs: usize, stdout: &str) {
    let mut reader = csv::Reader::from_path(folder.join("runs.csv")).unwrap();
    let status = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "status")
        .unwrap();
    let statuses: Vec<String> = reader
        .records()
        .map(|r| r.unwrap()[status].to_string())
        .collect();
    assert_eq!(statuses.len(), runs, "{name}: {stdout}");
    assert!(
        statuses.iter().all(|s| s == "complete"),
        "{name}: {statuses:?}\n{stdout}"
    );
}

#[test]
fn hesse_insert() {
    let _s = serial();
    kafka();
    // Many cells: 1 s of measurement each, without warm-up, is enough to see every run
    // complete (consumers get their partitions before any load starts, warm-up or not).
    cover_with("hesse-insert", 3, &["warmup=0s", "duration=1s"]);
}

/// In a home of its own: the study takes Kafka down to start mosquitto.
#[test]
fn hesse_insert_mqtt() {
    let _s = serial();
    let home = OwnHome::new();
    let stdout = cover_in(
        "hesse-insert-mqtt",
        6,
        &["warmup=0s", "duration=1s"],
        &home.env(),
    );
    assert!(stdout.contains("6 runs of 6 of the 12 cells"), "{stdout}");
    for line in [
        "broker: kafka up with 1 node",
        "broker: kafka down",
        "broker: mqtt up with 1 node",
    ] {
        assert!(stdout.contains(line), "{line}:\n{stdout}");
    }
}

#[test]
fn rabiee_kafka() {
    let _s = serial();
    kafka();
    cover_with("rabiee-kafka", 4, &["warmup=0s", "duration=1s"]);
}

#[test]
fn rabiee_kafka_tuning() {
    let _s = serial();
    kafka();
    cover_with("rabiee-kafka-tuning", 4, &[]);
}

#[test]
fn rabiee_rabbitmq() {
    let _s = serial();
    rabbitmq();
    quick_with("rabiee-rabbitmq", 15, &["warmup=0s", "duration=1s"]);
}

#[test]
fn kumar_omb() {
    let _s = serial();
    kafka();
    quick("kumar-omb", 2);
}

#[test]
fn client_scale_topics_partitions_and_tasks() {
    let _s = serial();
    kafka();
    // Up to 1,000 topics and 1,000 partitions: every run completes (the rate reached is
    // the machine's business; the runs must not fail or hang).
    quick("client-scale-topics", 4);
    quick("client-scale-partitions", 4);
    quick("client-scale-tasks", 4);
}

#[test]
fn max_sustainable_kafka() {
    let _s = serial();
    kafka();
    let (_dir, folder, _) = run_quick("max-sustainable-kafka");
    let search: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("search.json")).unwrap())
            .unwrap();
    let steps = search["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 20, "{search}");
    assert_eq!(search["bracket"].as_array().unwrap().len(), 2);
}

/// In a home of its own: the study starts and stops clusters of every family.
#[test]
fn replication_cost() {
    let _s = serial();
    let home = OwnHome::new();
    link_jvm_distributions(home.home.path());
    let (_dir, folder, stdout) = run_quick_in("replication-cost", &[], &[], &home.env());
    assert_all_complete("replication-cost", &folder, 11, &stdout);
    for (family, sizes, before) in [
        ("kafka", &["1 node", "3 nodes"][..], None),
        ("rabbitmq", &["1 node", "3 nodes"], Some("kafka")),
        ("nats", &["1 node", "3 nodes"], Some("rabbitmq")),
        ("pulsar", &["1 node", "3 nodes"], Some("nats")),
        ("artemis", &["1 node"], Some("pulsar")),
        ("redis", &["1 node"], Some("artemis")),
        ("mqtt", &["1 node"], Some("redis")),
    ] {
        for nodes in sizes {
            let line = format!("broker: {family} up with {nodes}");
            assert!(stdout.contains(&line), "{line}:\n{stdout}");
        }
        if let Some(before) = before {
            let down = format!("broker: {before} down");
            assert!(stdout.contains(&down), "{down}:\n{stdout}");
        }
    }
    // The quorum queue's run was on three RabbitMQ nodes, Pulsar's three-copy run on a
    // standalone of three bookies (the run itself, ensemble 3, needs the admin API to count
    // three bookies before it starts).
    for (cell, nodes) in [("c004-r1", 3), ("c008-r1", 3)] {
        let manifest = folder.join("runs").join(cell).join("manifest.json");
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
        assert_eq!(
            manifest["broker"]["nodes"].as_array().map(Vec::len),
            Some(nodes),
            "{cell}: {manifest:#}"
        );
    }
}

/// The fault studies need three-node clusters of each family and a minute per run: here every
/// run is planned and checked (`--dry-run`); tests/clusters.rs runs their faults on clusters.
#[test]
fn the_fault_studies_plan_every_run() {
    for (name, runs) in [("durability-kafka", 12), ("failover", 9)] {
        let output = brokerbench()
            .arg("study")
            .arg(bundled(name))
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
