//! The engine end to end over the in-memory mock driver: phases, rows, counts and the ledger.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use brokerbench_driver::lateness::WakeupLateness;
use brokerbench_driver::mock::{MockDriver, MockFaults};
use brokerbench_engine::{run, RunControl};
use brokerbench_model::{IntervalRow, Phase, RunObserver, RunStatus, Summary, Workload};

#[derive(Default)]
struct Rows(Vec<(u64, Phase, u64, u64, Option<i64>)>, Vec<Phase>);

impl RunObserver for Rows {
    fn phase_started(&mut self, phase: Phase, _at_ns: u64) {
        self.1.push(phase);
    }
    fn interval(&mut self, row: &IntervalRow) {
        self.0.push((
            row.second,
            row.phase,
            row.acknowledged,
            row.received,
            row.backlog,
        ));
    }
}

fn workload(yaml: &str) -> Workload {
    brokerbench_model::yaml::from_str(yaml).unwrap()
}

/// Tests that check times and rates take turns (the binary runs two tests at once), and
/// measure meanwhile how late the host wakes a thread, to widen their windows by it.
fn timed() -> (MutexGuard<'static, ()>, WakeupLateness) {
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    (turn, WakeupLateness::start())
}

/// How far a rate measured over the window may be from `rate`: 2%, and the messages that
/// lateness can move across the window's two edges (those of the longest schedule lag and
/// publish latency seen).
fn rate_slack(s: &Summary, rate: f64) -> f64 {
    let late_s = (s.latency.schedule_lag.max_ns + s.latency.publish.max_ns) as f64 / 1e9;
    rate * 0.02 + 2.0 * rate * late_s / s.measurement_s
}

fn control() -> RunControl {
    RunControl {
        run_id: "test".into(),
        stop: Arc::new(AtomicBool::new(false)),
    }
}

/// The longest span without acknowledgements, s.
fn longest_gap_s(gaps: &[(u64, u64)]) -> f64 {
    gaps.iter().map(|(from, to)| to - from).max().unwrap_or(0) as f64 / 1e9
}

#[test]
fn clean_run_counts_everything_once() {
    let w = workload("rate: 2000\nwarmup: 1s\nduration: 2s\ndrain_timeout: 2s\nproducers_per_topic: 2\nconsumers_per_topic: 1");
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let mut rows = Rows::default();
    let (turn, lateness) = timed();
    let out = run(&w, &mut driver, &mut rows, &control()).unwrap();
    let late = lateness.worst();
    drop(turn);
    // A well broker leaves no long span without acknowledgements (a short one is a
    // producer thread the scheduler held back on a busy host, as long as the host was late
    // in waking a thread: 0.73 s once with both cores busy).
    let bound = 0.5 + late.as_secs_f64();
    assert!(
        longest_gap_s(&out.ack_gaps) < bound,
        "{:?} (the host {late:?} late)",
        out.ack_gaps
    );
    let s = &out.summary;
    assert_eq!(s.status, RunStatus::Complete);
    assert!(
        s.integrity.is_clean() && s.integrity.checked,
        "{:?}",
        s.integrity
    );
    assert_eq!(s.total.sent, 6000, "3 s at 2000 msg/s");
    assert_eq!(s.total.acknowledged, s.total.sent);
    assert_eq!(s.total.received, s.total.sent);
    assert!(
        (s.throughput.acknowledged_per_s - 2000.0).abs() < rate_slack(s, 2000.0),
        "{:?} {:?}",
        s.throughput,
        s.latency
    );
    assert_eq!(s.latency.publish.count, 4000, "measurement window only");
    assert!(s.latency.end_to_end.count > 3900);
    // A host that woke threads this late may really have held the generator back.
    assert!(
        !s.client_bound || late >= Duration::from_millis(50),
        "{late:?}"
    );
    assert_eq!(
        rows.1,
        vec![Phase::Warmup, Phase::Measurement, Phase::Drain]
    );
    let seconds: Vec<u64> = rows.0.iter().map(|r| r.0).collect();
    assert_eq!(
        seconds,
        (0..seconds.len() as u64).collect::<Vec<_>>(),
        "one row per second, in order"
    );
    assert_eq!(
        rows.0.iter().map(|r| r.2).sum::<u64>(),
        6000,
        "rows add up to the total"
    );
    assert_eq!(rows.0[0].1, Phase::Warmup);
    assert_eq!(rows.0[1].1, Phase::Measurement);
    assert_eq!(rows.0.last().unwrap().4, Some(0), "nothing left behind");
}

#[test]
fn the_ledger_sees_loss_and_duplicates() {
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 1s");
    let faults = MockFaults {
        drop_every: Some(100),
        duplicate_every: Some(250),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let i = &out.summary.integrity;
    assert_eq!(i.lost, 10, "{i:?}");
    assert_eq!(
        i.duplicated, 2,
        "250 and 750 are duplicated; 500 and 1000 were dropped: {i:?}"
    );
}

#[test]
fn the_ledger_places_each_loss_duplicate_and_reorder_in_the_second_it_was_due() {
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 2s\ndrain_timeout: 1s");
    let faults = MockFaults {
        drop_every: Some(100),
        duplicate_every: Some(250),
        swap_every: Some(499),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let i = &out.summary.integrity;
    let by = &out.integrity_by_second;
    let second = |s: u64| by.over(|at| at == s).unwrap();
    // 1,000 messages due in each of the two seconds, every 100th of them dropped.
    assert_eq!((second(0).lost, second(1).lost), (10, 10), "{by:?}");
    let all = by.over(|_| true).unwrap();
    assert_eq!(
        (all.lost, all.duplicated, all.out_of_order),
        (i.lost, i.duplicated, i.out_of_order),
        "the seconds add up to the run: {by:?} {i:?}"
    );
    assert!(all.duplicated > 0 && all.out_of_order > 0, "{i:?}");
}

#[test]
fn the_ledger_counts_an_older_message_delivered_after_a_newer_one_as_out_of_order() {
    // Messages 99, 198, ... 990 each arrive after the one that follows them: 10 out of order,
    // in each of two subscriptions, nothing lost or duplicated.
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 1s");
    let faults = MockFaults {
        swap_every: Some(99),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 2);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let i = &out.summary.integrity;
    assert_eq!(out.summary.total.received, 2000, "{:?}", out.summary.total);
    assert_eq!((i.lost, i.duplicated), (0, 0), "{i:?}");
    assert_eq!(i.out_of_order, 20, "{i:?}");
    assert!(!out.summary.is_clean());
}

#[test]
fn fanout_subscriptions_each_receive_everything() {
    let w =
        workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 1s\nconsumers_per_topic: 1");
    let mut driver = MockDriver::new(MockFaults::default(), 3);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    assert_eq!(
        out.summary.total.received,
        3 * out.summary.total.acknowledged
    );
    assert!(out.summary.integrity.is_clean());
}

#[test]
fn max_rate_and_produce_only() {
    let w = workload(
        "rate: max\nwarmup: 0s\nduration: 1s\nconsumers_per_topic: 0\nmax_in_flight: 1000",
    );
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert_eq!(s.mode, "max-rate");
    assert!(s.total.acknowledged > 10_000, "{:?}", s.total);
    assert!(!s.integrity.checked);
    assert!(s.notes.iter().any(|n| n.contains("not open-loop")));
}

#[test]
fn max_rate_keeps_at_most_max_in_flight_and_fills_it() {
    // A broker taking 5,000 msg/s: the closed loop waits for room, never exceeding the bound.
    let w =
        workload("rate: max\nwarmup: 0s\nduration: 1s\nconsumers_per_topic: 0\nmax_in_flight: 8");
    let faults = MockFaults {
        capacity: Some(5_000.0),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    assert_eq!(driver.most_in_flight(), 8, "{:?}", out.summary.total);
    assert!(
        out.summary.total.acknowledged > 1_000,
        "{:?}",
        out.summary.total
    );
}

#[test]
fn stop_flag_ends_the_run_as_interrupted() {
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 60s");
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let c = control();
    let stop = c.stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let started = std::time::Instant::now();
    let out = run(&w, &mut driver, &mut Rows::default(), &c).unwrap();
    assert!(started.elapsed().as_secs() < 10);
    assert_eq!(out.summary.status, RunStatus::Interrupted);
    assert!(out.summary.measurement_s > 1.0 && out.summary.measurement_s < 3.0);
    assert!(out.summary.integrity.is_clean());
}

#[test]
fn slow_acknowledgements_that_fill_the_client_buffer_are_broker_bound_not_client_bound() {
    // The broker acknowledges 1,000 msg/s of the 5,000 offered; the client holds 500
    // unacknowledged messages, so sends soon wait for room and the schedule slips.
    let w =
        workload("rate: 5000\nwarmup: 0s\nduration: 3s\ndrain_timeout: 2s\nconsumers_per_topic: 0");
    let faults = MockFaults {
        capacity: Some(1000.0),
        buffer: Some(500),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert!(s.broker_bound && !s.client_bound, "{:?}", s.notes);
    let said: Vec<&String> = s.notes.iter().filter(|n| n.contains("-BOUND")).collect();
    assert_eq!(said.len(), 1, "one cause, said once: {:?}", s.notes);
    assert!(said[0].starts_with("BROKER-BOUND"), "{said:?}");
}

#[test]
fn a_client_slower_than_the_schedule_is_reported_client_bound() {
    // Each send takes >= 1 ms, so at most ~1000 msg/s get out against a target of 5000.
    let w =
        workload("rate: 5000\nwarmup: 0s\nduration: 3s\ndrain_timeout: 1s\nconsumers_per_topic: 0");
    let faults = MockFaults {
        send_delay: Some(std::time::Duration::from_millis(1)),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert!(
        s.client_bound && !s.broker_bound,
        "{:?}",
        s.latency.schedule_lag
    );
    assert!(
        s.notes
            .iter()
            .filter(|n| n.starts_with("CLIENT-BOUND"))
            .count()
            == 1,
        "{:?}",
        s.notes
    );
    assert!(
        s.latency.schedule_lag.max_ns > 1_000_000_000,
        "lag grew past a second"
    );
    let not_sent = s.errors["not_sent_behind_schedule"];
    assert_eq!(
        s.total.sent + not_sent,
        15_000,
        "every message due in the window is sent or counted"
    );
    assert!(
        out.ended_ns - out.started_ns < 6_000_000_000,
        "the producer stops at the window's end"
    );
    // Open loop: latency is counted from the intended time, so it includes the lag.
    assert!(s.latency.publish.p99_ns >= s.latency.schedule_lag.p99_ns);

    // The same client at a rate it can keep is not client-bound.
    let w =
        workload("rate: 200\nwarmup: 0s\nduration: 2s\ndrain_timeout: 1s\nconsumers_per_topic: 0");
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    assert!(!out.summary.client_bound);
}

#[test]
fn gaps_shorter_than_the_minimum_sleep_still_send_every_message() {
    // 50,000 msg/s is one message every 20 µs, below the producer's 100 µs minimum sleep.
    let w = workload(
        "rate: 50000\nwarmup: 0s\nduration: 2s\ndrain_timeout: 1s\nconsumers_per_topic: 1",
    );
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.total.sent, 100_000);
    assert!(s.integrity.is_clean());
    assert!(!s.client_bound);
}

#[test]
fn unconfirmed_publishing_counts_sent_and_what_never_arrived_as_undelivered() {
    // The drain waits for the 10 dropped messages until its timeout: 3 s leaves the consumer
    // time to take the other 990 on a loaded machine (1 s once counted more as lost).
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 3s");
    let faults = MockFaults {
        unconfirmed: true,
        drop_every: Some(100),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert_eq!(s.total.sent, 1000);
    assert_eq!(s.total.acknowledged, 0);
    assert_eq!(
        s.latency.publish.count, 0,
        "no confirms, no publish latency"
    );
    assert_eq!(
        (s.integrity.lost, s.integrity.undelivered),
        (0, 10),
        "sent at most once and never received: undelivered, not lost: {:?}",
        s.integrity
    );
    assert!(s.integrity.is_clean(), "no promise was broken");
    for said in [
        "not confirmed",
        "10 messages sent and never received are undelivered",
    ] {
        assert!(
            s.notes.iter().any(|n| n.contains(said)),
            "{said}: {:?}",
            s.notes
        );
    }
}

#[test]
fn what_the_broker_counts_as_dropped_past_its_limits_is_dropped_up_to_its_count() {
    // 10 of 1,000 acknowledged messages never arrive; the broker counted 10 dropped, then 4.
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 1s");
    for (counted, lost) in [(10, 0), (4, 6)] {
        let faults = MockFaults {
            drop_every: Some(100),
            counts_dropped: Some(counted),
            ..MockFaults::default()
        };
        let mut driver = MockDriver::new(faults, 1);
        let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
        let s = &out.summary;
        let i = &s.integrity;
        assert_eq!((i.lost, i.dropped_by_broker), (lost, counted), "{i:?}");
        let said = format!("{counted} messages acknowledged and never received were dropped by the broker past its limits");
        assert!(
            s.notes.iter().any(|n| n.contains(&said)),
            "{said}: {:?}",
            s.notes
        );
    }
}

#[test]
fn drops_by_broker_policy_are_not_reported_as_lost() {
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 1s");
    let faults = MockFaults {
        drop_every: Some(100),
        drops_by_policy: true,
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let i = &out.summary.integrity;
    assert_eq!((i.lost, i.dropped_by_broker), (0, 10), "{i:?}");
    assert_eq!(
        out.integrity_by_second.lost(),
        0,
        "dropped in no second either"
    );
    assert!(out
        .summary
        .notes
        .iter()
        .any(|n| n.contains("dropped by the broker")));
}

#[test]
fn a_drain_cut_off_while_consumers_still_receive_says_so() {
    // 2000 msg/s for 1 s against a consumer that takes at most 1 message per millisecond:
    // about half is still queued when the 300 ms drain ends.
    let w = workload("rate: 2000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 300ms");
    let faults = MockFaults {
        receive_per_poll: Some(1),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert!(s.integrity.lost > 100, "{:?}", s.integrity);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("drain ended at its timeout")
                && n.contains("still receiving")
                && n.contains(&s.integrity.lost.to_string())),
        "{:?}",
        s.notes
    );
    // A drain that ends because everything arrived says nothing of the kind.
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 1s");
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    assert!(
        !out.summary.notes.iter().any(|n| n.contains("drain ended")),
        "{:?}",
        out.summary.notes
    );
}

#[test]
fn what_the_broker_still_holds_when_the_drain_ends_is_unconsumed_not_lost() {
    // The same slow consumer, whose broker tells the queue's depth after the drain: what
    // waits there was not consumed yet, and is no loss.
    let w = workload("rate: 2000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 300ms");
    let faults = MockFaults {
        receive_per_poll: Some(1),
        tells_unread: true,
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    let missing = s.total.acknowledged - s.total.received;
    assert!(missing > 100, "{:?}", s.total);
    assert_eq!(s.integrity.lost, 0, "{:?}", s.integrity);
    assert_eq!(s.integrity.unconsumed, missing, "{:?}", s.integrity);
    assert_eq!(
        s.integrity.unconsumed_evidence.as_deref(),
        Some("the mock broker's queue length")
    );
    assert!(s.is_clean(), "{:?}", s.integrity);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("not consumed yet, not lost")),
        "{:?}",
        s.notes
    );
    // Messages the broker never queued (acknowledged, then dropped) are still lost: only
    // what the queue holds is unconsumed.
    let faults = MockFaults {
        receive_per_poll: Some(1),
        tells_unread: true,
        drop_every: Some(10),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    let missing = s.total.acknowledged - s.total.received;
    assert!(s.integrity.unconsumed > 100, "{:?}", s.integrity);
    assert!(
        s.integrity.lost.abs_diff(s.total.acknowledged / 10) <= 1,
        "every 10th acknowledged message was dropped: {:?} {:?}",
        s.integrity,
        s.total
    );
    assert_eq!(s.integrity.lost + s.integrity.unconsumed, missing);
}

#[test]
fn backlog_mode_pauses_consumers_then_drains_and_runs_duration_more() {
    // 2,000 msg/s of 100 B; the backlog asked for is 3,000 messages: built in about 2 s.
    let w = workload(
        "rate: 2000\nwarmup: 1s\nduration: 1s\ndrain_timeout: 2s\nbacklog: {size: 300KB, drain_ratio: 1.0}",
    );
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let mut rows = Rows::default();
    let out = run(&w, &mut driver, &mut rows, &control()).unwrap();
    let s = &out.summary;
    assert!(
        s.integrity.is_clean() && s.integrity.checked,
        "{:?}",
        s.integrity
    );
    assert_eq!(s.total.received, s.total.acknowledged);
    let b = s.backlog.as_ref().expect("backlog report");
    assert!(b.built_messages >= 3000, "{b:?}");
    assert_eq!(b.built_bytes, b.built_messages * 100);
    let (build, drain) = (b.build_s().unwrap(), b.drain_s().unwrap());
    assert!(build >= 1.0, "3,000 messages at 2,000 msg/s: {b:?}");
    assert!(
        b.paused_s >= 1.0 && b.paused_s < 1.5,
        "paused when the window opened: {b:?}"
    );
    // The window is the build, the drain and the duration after it.
    assert!(
        s.measurement_s >= build + drain + 1.0 - 0.2,
        "window {} s, {b:?}",
        s.measurement_s
    );
    // Rows while paused received nothing, and the backlog they show grew past the size.
    let measurement: Vec<_> = rows
        .0
        .iter()
        .filter(|r| r.1 == Phase::Measurement)
        .collect();
    assert!(
        measurement.iter().any(|r| r.2 > 0 && r.3 == 0),
        "{measurement:?}"
    );
    assert!(
        measurement.iter().any(|r| r.4.unwrap() >= 3000),
        "{measurement:?}"
    );
    assert_eq!(rows.0.last().unwrap().4, Some(0), "drained at the end");
    // Received faster than produced while draining.
    assert!(b.drain_received_per_s.unwrap() > 2000.0, "{b:?}");
}

#[test]
fn backlog_mode_interrupted_while_building_still_drains_what_it_can() {
    let w =
        workload("rate: 1000\nwarmup: 0s\nduration: 1s\ndrain_timeout: 5s\nbacklog: {size: 1GB}");
    let mut driver = MockDriver::new(MockFaults::default(), 1);
    let control = control();
    let stop = control.stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let out = run(&w, &mut driver, &mut Rows::default(), &control).unwrap();
    stopper.join().unwrap();
    let s = &out.summary;
    assert_eq!(s.status, RunStatus::Interrupted);
    let b = s.backlog.as_ref().unwrap();
    assert!(b.resumed_s.is_none(), "{b:?}");
    assert!(
        s.notes.iter().any(|n| n.contains("never reached")),
        "{:?}",
        s.notes
    );
    // Consumers were let go for the drain: what was acknowledged was received.
    assert_eq!(s.total.received, s.total.acknowledged, "{:?}", s.integrity);
}

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Counts, while the run goes, the threads that serve groups of producer tasks and those of
/// single tasks (other tests of this binary may add to the second, never to the first).
#[derive(Default)]
struct ProducerThreads(usize, usize);

impl RunObserver for ProducerThreads {
    fn interval(&mut self, _row: &IntervalRow) {
        self.0 = self.0.max(threads_named("producers-"));
        self.1 = self.1.max(threads_named("producer-"));
    }
}

#[test]
fn many_producer_tasks_share_a_few_threads_and_keep_their_own_counts() {
    // 20 topics with a producer each, on 3 threads.
    let w = workload(
        "topics: 20\nrate: 4000\nwarmup: 1s\nduration: 2s\ndrain_timeout: 2s\nproducer_threads: 3",
    );
    let faults = MockFaults {
        stamps_acknowledgements: true,
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let mut threads = ProducerThreads::default();
    let (turn, lateness) = timed();
    let out = run(&w, &mut driver, &mut threads, &control()).unwrap();
    let late = lateness.worst();
    drop(turn);
    let s = &out.summary;
    assert_eq!(threads.0, 3, "20 producer tasks on 3 threads");
    assert!(
        s.integrity.is_clean() && s.integrity.checked,
        "{:?}",
        s.integrity
    );
    assert_eq!(s.total.sent, 12_000, "3 s at 4,000 msg/s");
    assert_eq!(s.total.received, s.total.sent);
    assert!(
        (s.throughput.acknowledged_per_s - 4000.0).abs() < rate_slack(s, 4000.0),
        "{:?} {:?}",
        s.throughput,
        s.latency
    );
    // Sends keep their schedule: the thread sends each task's messages when due, late by no
    // more than the host wakes any thread late.
    assert!(
        s.latency.schedule_lag.p99_ns < 20_000_000 + late.as_nanos() as u64,
        "{:?}; the host woke threads up to {late:?} late",
        s.latency.schedule_lag
    );
    // A client that does not stamp acknowledgements keeps a thread per task, and so does one
    // that stamps them but writes what it was sent only when polled (the own clients).
    let polled = MockFaults {
        stamps_acknowledgements: true,
        sends_when_polled: true,
        ..MockFaults::default()
    };
    for faults in [MockFaults::default(), polled] {
        let mut driver = MockDriver::new(faults, 1);
        let mut threads = ProducerThreads::default();
        let w = workload("topics: 6\nrate: 600\nwarmup: 0s\nduration: 2s\nproducer_threads: 2");
        run(&w, &mut driver, &mut threads, &control()).unwrap();
        assert_eq!(threads.0, 0, "no grouped threads");
        assert!(threads.1 >= 6, "a thread per task: {}", threads.1);
    }
}

/// Counts the seconds in which some producer was disconnected.
#[derive(Default)]
struct Disconnected(Vec<u64>);

impl RunObserver for Disconnected {
    fn interval(&mut self, row: &IntervalRow) {
        self.0.push(row.disconnected_producers);
    }
}

#[test]
fn an_outage_is_waited_out_reported_once_and_its_messages_sent_late() {
    // Two producers at 1000 msg/s in all; the broker is gone from 1.2 s to 2.0 s after
    // prepare. Messages in flight at the loss fail; those due meanwhile wait and go out late.
    let w =
        workload("rate: 1000\nwarmup: 0s\nduration: 3s\ndrain_timeout: 1s\nproducers_per_topic: 2");
    let faults = MockFaults {
        outage: Some((
            std::time::Duration::from_millis(1200),
            std::time::Duration::from_millis(800),
        )),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let mut rows = Disconnected::default();
    let (turn, lateness) = timed();
    let out = run(&w, &mut driver, &mut rows, &control()).unwrap();
    let late = lateness.worst().as_secs_f64();
    drop(turn);
    let s = &out.summary;
    assert_eq!(
        s.outages.len(),
        1,
        "one outage seen by both: {:?}",
        s.outages
    );
    let o = &s.outages[0];
    assert_eq!(o.producers, 2, "{o:?}");
    // Late wake-ups on a busy host move the ends later, never earlier.
    assert!(
        o.start_s > 0.5 && o.start_s < 1.5 + late,
        "{o:?}, {late} s late"
    );
    let d = o.duration_s().expect("acknowledged again");
    assert!(d > 0.5 && d < 1.3 + late, "{o:?}, {late} s late");
    let failed = s.errors.get("connection_lost").copied().unwrap_or(0);
    assert_eq!(o.failed, failed, "{:?}", s.errors);
    assert_eq!(s.total.failed, failed);
    assert_eq!(
        s.total.sent, 3000,
        "every message due in the outage was sent after it"
    );
    assert_eq!(s.total.acknowledged + failed, 3000);
    assert_eq!(s.integrity.lost, 0, "{:?}", s.integrity);
    assert!(
        s.latency.publish.max_ns > 500_000_000,
        "late messages carry the wait: {:?}",
        s.latency.publish
    );
    assert!(!s.client_bound && !s.broker_bound, "{:?}", s.notes);
    let unavailable: Vec<&String> = s
        .notes
        .iter()
        .filter(|n| n.contains("BROKER UNAVAILABLE"))
        .collect();
    assert_eq!(unavailable.len(), 1, "{:?}", s.notes);
    assert!(unavailable[0].contains("2 producers"), "{unavailable:?}");
    // The spans without acknowledgements hold the outage, failed messages included.
    let longest = longest_gap_s(&out.ack_gaps);
    assert!(
        (0.7..1.3 + late).contains(&longest),
        "{:?}, {late} s late",
        out.ack_gaps
    );
    let marked = rows.0.iter().filter(|&&n| n > 0).count();
    assert!(
        (1..=2).contains(&marked) && rows.0.iter().all(|&n| n <= 2),
        "the outage's seconds are marked: {:?}",
        rows.0
    );
}

#[test]
fn a_client_that_never_gets_the_broker_back_reports_an_open_outage() {
    let w = workload("rate: 500\nwarmup: 0s\nduration: 2s\ndrain_timeout: 500ms");
    let faults = MockFaults {
        outage: Some((
            std::time::Duration::from_millis(700),
            std::time::Duration::from_secs(60),
        )),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    let s = &out.summary;
    assert_eq!(s.outages.len(), 1, "{:?}", s.outages);
    assert_eq!(s.outages[0].first_ack_s, None);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("BROKER UNAVAILABLE") && n.contains("no acknowledgement")),
        "{:?}",
        s.notes
    );
    assert!(!s.client_bound, "{:?}", s.notes);
    assert!(s.total.sent < 500, "nothing was sent while it was gone");
    // The span without acknowledgements runs from the loss to the end of the run, though
    // every message due in it failed rather than waited.
    let longest = longest_gap_s(&out.ack_gaps);
    assert!(longest > 1.2, "{:?}", out.ack_gaps);
}

#[test]
fn a_run_whose_every_message_fails_stops_early_and_names_the_setting() {
    let w = workload("rate: 1000\nwarmup: 1s\nduration: 20s\ndrain_timeout: 1s");
    let faults = MockFaults {
        reject_all: true,
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let started = std::time::Instant::now();
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(6),
        "stopped after its first seconds, not at the planned 21 s"
    );
    let s = &out.summary;
    assert_eq!(s.status, RunStatus::Failed);
    assert!(!s.is_clean());
    assert_eq!(s.total.acknowledged, 0);
    assert!(s.notes[0].starts_with("STOPPED after 2 s"), "{:?}", s.notes);
    assert!(
        s.notes[0].contains("rejected") && s.notes[0].contains("reject_all"),
        "the error and the setting the driver names for it: {:?}",
        s.notes
    );
    assert!(
        !s.notes.iter().any(|n| n.contains("interrupted")),
        "{:?}",
        s.notes
    );
}

#[test]
fn a_run_with_some_failures_is_not_stopped() {
    // Failures without acknowledgements stop a run; acknowledgements beside them do not.
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 3s\ndrain_timeout: 1s");
    let faults = MockFaults {
        outage: Some((
            std::time::Duration::from_millis(500),
            std::time::Duration::from_millis(300),
        )),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    assert_eq!(
        out.summary.status,
        RunStatus::Complete,
        "{:?}",
        out.summary.notes
    );
}

/// A run of `w` on a mock broker with `faults`, in its turn among the tests on timing, again
/// (three tries at most) while the host woke a thread 20 ms late or more. A second's sends are
/// on schedule while their lag p99 stays under 10 ms; one wake-up 20 ms late leaves a
/// schedule that far behind for 1% of a second (an idle host here woke 4.8-22 ms late at worst
/// in a run of 8 s), so such a host, not the engine, can take a second out of a span.
/// Returns the summary and how late the host woke during it.
fn on_a_timely_host(w: &Workload, faults: &MockFaults) -> (Summary, Duration) {
    let mut tries = 0;
    loop {
        tries += 1;
        let (turn, lateness) = timed();
        let mut driver = MockDriver::new(*faults, 1);
        let out = run(w, &mut driver, &mut Rows::default(), &control()).unwrap();
        let late = lateness.worst();
        drop(turn);
        if late < Duration::from_millis(20) || tries == 3 {
            return (out.summary, late);
        }
    }
}

#[test]
fn a_broker_that_acknowledges_late_while_sends_keep_their_schedule_is_slow() {
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 6s\ndrain_timeout: 2s");
    // From 2 s for 2 s every acknowledgement comes 300 ms after its send.
    let faults = MockFaults {
        slow: Some((
            Duration::from_millis(2000),
            Duration::from_millis(2000),
            Duration::from_millis(300),
        )),
        ..MockFaults::default()
    };
    let (s, late) = on_a_timely_host(&w, &faults);
    let slow: Vec<&String> = s
        .notes
        .iter()
        .filter(|n| n.contains("BROKER SLOW"))
        .collect();
    assert_eq!(
        slow.len(),
        1,
        "{:?}; the host woke up to {late:?} late",
        s.notes
    );
    assert!(
        (slow[0].contains("at 2 s for 2 s") || slow[0].contains("at 2 s for 3 s"))
            && slow[0].contains("publish p99 up to 3")
            && slow[0].contains("kept their schedule"),
        "{}; the host woke up to {late:?} late",
        slow[0]
    );
    assert!(s.stalls.is_empty() && s.outages.is_empty(), "{:?}", s.notes);
    assert!(
        !s.client_bound && !s.broker_bound,
        "{:?}; the host woke up to {late:?} late",
        s.notes
    );
    assert!(s.integrity.is_clean(), "{:?}", s.integrity);
    // Without the slowdown: no such note.
    let (s, late) = on_a_timely_host(&w, &MockFaults::default());
    assert!(
        s.notes.iter().all(|n| !n.contains("BROKER SLOW")),
        "{:?}; the host woke up to {late:?} late",
        s.notes
    );
}

#[test]
fn a_broker_that_stops_acknowledging_while_connected_is_a_stall_not_client_bound() {
    let w = workload("rate: 1000\nwarmup: 0s\nduration: 6s\ndrain_timeout: 2s");
    let faults = MockFaults {
        stall: Some((
            std::time::Duration::from_millis(1500),
            std::time::Duration::from_millis(3000),
        )),
        buffer: Some(500),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let mut rows = Rows::default();
    let (turn, lateness) = timed();
    let out = run(&w, &mut driver, &mut rows, &control()).unwrap();
    let late = lateness.worst().as_secs_f64();
    drop(turn);
    let s = &out.summary;
    assert!(s.outages.is_empty(), "{:?}", s.outages);
    assert_eq!(s.stalls.len(), 1, "{:?} {:?}", s.stalls, s.notes);
    let stall = &s.stalls[0];
    assert!(
        (2.0..=3.0 + late).contains(&stall.seconds) && (1.0..=3.0 + late).contains(&stall.start_s),
        "{stall:?}, {late} s late"
    );
    assert!(!s.client_bound && !s.broker_bound, "{:?}", s.notes);
    let longest = longest_gap_s(&out.ack_gaps);
    assert!(
        (2.9..3.2 + late).contains(&longest),
        "{:?}, {late} s late",
        out.ack_gaps
    );
    assert_eq!(
        s.notes
            .iter()
            .filter(|n| n.contains("BROKER STALLED"))
            .count(),
        1,
        "{:?}",
        s.notes
    );
    // The late acknowledgements after the stall are the stall's, not a slow broker's.
    assert!(
        s.notes.iter().all(|n| !n.contains("BROKER SLOW")),
        "{:?}",
        s.notes
    );
    assert!(s.integrity.is_clean(), "{:?}", s.integrity);
}

#[test]
fn at_max_rate_a_send_under_way_when_the_window_closes_is_not_an_error() {
    // The broker stops acknowledging half a second before the window ends and stays silent
    // past its end: the client's buffer fills, and the producer's last send is still waiting
    // for room when the window (and its grace) closes. At max rate there is no schedule to be
    // behind, so that message is counted apart, and the run is clean.
    let w = workload(
        "rate: max\nwarmup: 0s\nduration: 2s\ndrain_timeout: 5s\nmax_in_flight: 1000\nconsumers_per_topic: 1",
    );
    let faults = MockFaults {
        stall: Some((
            std::time::Duration::from_millis(1500),
            std::time::Duration::from_millis(1500),
        )),
        buffer: Some(50),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let turn = timed();
    let out = run(&w, &mut driver, &mut Rows::default(), &control()).unwrap();
    drop(turn);
    let s = &out.summary;
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.not_sent_at_window_end, 1, "{:?}", s.notes);
    assert!(s.integrity.is_clean(), "{:?}", s.integrity);
    assert!(s.is_clean(), "{s:?}");
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("under way when the window closed")),
        "{:?}",
        s.notes
    );
}
