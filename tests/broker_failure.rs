//! A broker that goes away mid-run is measured, not fatal: the schedule is kept, failures are
//! counted, results are written and the exit code says the run was not clean. Its own test
//! binary, because it stops the shared managed broker (and starts it again at the end).

mod common;

use brokerbench_kafka::managed::Kafka;
use common::*;

/// Starts the broker again even if an assertion fails.
struct Restart(Kafka);
impl Drop for Restart {
    fn drop(&mut self) {
        self.0.up().expect("restarting the managed Kafka");
    }
}

#[test]
fn a_broker_stopped_mid_run_is_counted_and_results_are_written() {
    let _turn = serial();
    kafka();
    let broker = Kafka::new(&brokerbench_brokers::home());
    let dir = tempfile::tempdir().unwrap();
    let stopper = {
        let broker = broker.clone();
        let folder = results_folder(dir.path());
        std::thread::spawn(move || {
            // 1 s warm-up, then 2 s of measurement before the broker goes away; counted from
            // the run's own rows, since getting partitions can take seconds (the first
            // consumer group of a new broker creates the offsets topic).
            let measuring = wait_for_measured_seconds(&folder, 2);
            let restart = Restart(broker.clone());
            broker
                .down()
                .expect("stopping the broker")
                .expect("it was running");
            (restart, measuring)
        })
    };
    let sets = [
        "rate=1000".to_string(),
        "warmup=1s".into(),
        "duration=6s".into(),
        "drain_timeout=3s".into(),
        // The run's topics cannot be deleted with the broker gone; keep the run's end short.
        "delete_topics=false".into(),
    ];
    let run = run_in(dir, &with_sets(&sets, &[]));
    let (_restart, measuring) = stopper.join().unwrap();
    assert!(
        measuring,
        "the run never measured 2 s\nstderr: {}",
        run.stderr
    );
    assert_eq!(run.code, 1, "completed, not clean\nstderr: {}", run.stderr);
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{s:#}");
    let total = &s["total"];
    assert!(
        total["acknowledged"].as_u64().unwrap() >= 1500,
        "acknowledged before the stop: {s:#}"
    );
    assert!(
        total["sent"].as_u64().unwrap() >= 6500,
        "the schedule went on after the broker stopped: {s:#}"
    );
    let integrity = &s["integrity"];
    let failed = total["failed"].as_u64().unwrap() + integrity["unacknowledged"].as_u64().unwrap();
    assert!(
        failed > 1000,
        "messages sent to a stopped broker are failures or unacknowledged: {s:#}"
    );
    assert_eq!(run.manifest()["status"], "complete");
    let rows = run.file("timeseries.csv").lines().count() - 1;
    assert!(
        rows >= 9,
        "one row per second to the end of the drain, got {rows}"
    );
}
