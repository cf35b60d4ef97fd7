//! A study that starts the managed broker afresh before each run (`between_runs: {broker:
//! restart}`), on NATS, the quickest family to start again (Kafka's restarts took 20 s each
//! here, more with the other lanes running; that Kafka's metrics endpoint answers again after a
//! restart is checked by its conformance kill).

use crate::common::*;
use crate::mock::study::{csv_rows, json, study};

use super::nats_port;

#[test]
fn between_runs_broker_restart_gives_each_run_a_freshly_started_managed_broker() {
    let _serial = serial();
    nats_port();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "restart.yaml",
        &format!(
            "name: restart\ndriver: {NATS_DRIVER}\n{}\nrepetitions: 2\nbetween_runs: {{broker: restart}}\n",
            "set: {rate: 2000, warmup: 1s, duration: 2s, drain_timeout: 5s}"
        ),
    );
    let s = study(dir.path(), &file, &[]);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    let runs = csv_rows(&s.folder.join("runs.csv"));
    assert_eq!(runs.len(), 2);
    // The broker process each run monitored: a new one for the second run.
    let pids: Vec<u64> = runs
        .iter()
        .map(|r| {
            json(&s.folder.join(&r["results"]).join("summary.json"))["resources"]["broker"]
                ["root_pid"]
                .as_u64()
                .expect("the managed broker was monitored")
        })
        .collect();
    assert_ne!(
        pids[0], pids[1],
        "the broker was restarted between the runs"
    );
    assert!(runs.iter().all(|r| r["status"] == "complete"), "{runs:?}");
    // The restarted broker serves its metrics too (its monitoring port had to be free again).
    let second = json(&s.folder.join(&runs[1]["results"]).join("summary.json"));
    assert_eq!(
        second["broker_metrics"]["source"], "nats",
        "{:#}",
        second["broker_metrics"]
    );
}
