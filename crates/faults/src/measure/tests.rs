use super::*;
use brokerbench_model::faults::{Fault, FaultAction, FaultNode};
use brokerbench_model::new_histogram;
use std::time::Duration;

const T0: u64 = 1_000 * SECOND_NS;

/// A row of second `s` (from T0) with `acknowledged` acks, publish latency `ms` and schedule
/// lag `lag_ms`.
fn row(s: u64, acknowledged: u64, ms: u64, lag_ms: u64) -> IntervalRow {
    let mut publish = new_histogram();
    let mut lag = new_histogram();
    for _ in 0..acknowledged.max(1) {
        publish.record(ms * 1_000_000).unwrap();
        lag.record(lag_ms * 1_000_000).unwrap();
    }
    IntervalRow {
        second: s,
        phase: if s < 2 {
            Phase::Warmup
        } else {
            Phase::Measurement
        },
        start_ns: T0 + s * SECOND_NS,
        sent: acknowledged,
        acknowledged,
        failed: 0,
        received: acknowledged,
        bytes_acknowledged: 0,
        bytes_received: 0,
        backlog: None,
        acknowledged_rate_1m: 0.0,
        publish: if acknowledged == 0 {
            new_histogram()
        } else {
            publish
        },
        end_to_end: new_histogram(),
        schedule_lag: lag,
        schedule_lag_max_ns: lag_ms * 1_000_000,
        disconnected_producers: 0,
        blocked_producers: 0,
    }
}

/// 30 s at 1,000 msg/s with 3 ms latency, nothing acknowledged in seconds 10–13 (a kill at
/// 10.2 s), a catch-up burst at 14, back at 15.
fn record() -> RunRecord {
    let mut record = RunRecord {
        started_ns: T0,
        window_start_ns: T0 + 2 * SECOND_NS,
        window_end_ns: T0 + 30 * SECOND_NS,
        ..RunRecord::default()
    };
    for s in 0..30 {
        let r = match s {
            10 => row(s, 200, 3, 1),
            11..=13 => IntervalRow {
                failed: 7,
                ..row(s, 0, 0, 1)
            },
            14 => row(s, 4000, 3500, 1),
            _ => row(s, 1000, 3, 1),
        };
        record.keep(&r);
    }
    record
}

/// The run's findings at 1,000 msg/s: `gaps`, and nothing checked.
fn findings(gaps: &[(u64, u64)]) -> Findings<'_> {
    static NOTHING: std::sync::OnceLock<IntegrityBySecond> = std::sync::OnceLock::new();
    Findings {
        gaps,
        target_rate: Some(1000.0),
        integrity: NOTHING.get_or_init(IntegrityBySecond::default),
    }
}

fn kill(ended: Option<u64>) -> Injected {
    Injected {
        index: 0,
        fault: Some(Fault {
            at: Duration::from_millis(8200),
            action: FaultAction::Kill,
            node: Some(FaultNode::Id(2)),
            lasts: None,
            restart_after: Some(Duration::from_secs(3)),
            run: None,
            undo: None,
        }),
        node: Some(2),
        chosen: Some("as given".into()),
        pid: Some(4242),
        injected_ns: Some(T0 + 10_200_000_000),
        ended_ns: ended,
        ..Injected::default()
    }
}

#[test]
fn a_kill_is_measured_from_the_gaps_and_the_rows() {
    let gaps = [
        (T0 + 5 * SECOND_NS, T0 + 5_150_000_000),
        (T0 + 10_150_000_000, T0 + 14_050_000_000),
    ];
    // Lost: 4 due in second 3 (long before), 2 in second 7 (before), 3 in second 12
    // (during); one duplicated in second 15, while it had not recovered yet.
    let mut integrity = IntegrityBySecond::new(true);
    integrity.at(3).lost = 4;
    integrity.at(7).lost = 2;
    integrity.at(12).lost = 3;
    integrity.at(14).duplicated = 1;
    integrity.at(20).out_of_order = 1;
    let findings = Findings {
        gaps: &gaps,
        target_rate: Some(1000.0),
        integrity: &integrity,
    };
    let reports = measure(&[kill(Some(T0 + 13_200_000_000))], &record(), &findings);
    let r = &reports[0];
    assert_eq!(r.index, 1);
    assert!((r.injected_at_s - 10.2).abs() < 1e-9);
    assert_eq!(r.ended_at_s, Some(13.2));
    assert!((r.unavailable_s - 3.85).abs() < 1e-9, "{}", r.unavailable_s);
    assert!(
        (r.recovered_after_s.unwrap() - 4.8).abs() < 1e-9,
        "back at second 15"
    );
    assert!(r.before.publish_p99_ms.unwrap() < 4.0);
    assert!(r.during.publish_max_ms.unwrap() > 3000.0);
    assert_eq!(
        (r.before.failed, r.during.failed),
        (0, 21),
        "sends failed while it lasted"
    );
    assert_eq!(
        (r.before.lost, r.during.lost),
        (Some(2), Some(3)),
        "lost in the 5 s before and in the seconds it lasted"
    );
    assert_eq!(
        (r.during.duplicated, r.during.out_of_order),
        (Some(1), Some(0))
    );
    let unchecked = Findings {
        integrity: &IntegrityBySecond::default(),
        ..findings
    };
    let reports = measure(&[kill(Some(T0 + 13_200_000_000))], &record(), &unchecked);
    assert_eq!(
        reports[0].during.lost, None,
        "no consumers, nothing checked"
    );
    assert_eq!(r.describe(), "kill of node 2 (pid 4242)");
}

#[test]
fn a_fault_that_never_ended_lasts_to_the_windows_end_and_may_not_recover() {
    let mut record = record();
    record.rows.truncate(14);
    record.window_end_ns = T0 + 14 * SECOND_NS;
    let reports = measure(&[kill(None)], &record, &findings(&[]));
    assert_eq!(reports[0].ended_at_s, None);
    assert_eq!(reports[0].recovered_after_s, None);
    assert_eq!(reports[0].unavailable_s, 0.0);
    assert!((reports[0].during.seconds - 3.8).abs() < 1e-9);
}

#[test]
fn a_fault_not_injected_keeps_why_and_measures_nothing() {
    let mut never = kill(None);
    never.injected_ns = None;
    never.pid = None;
    never.problems = vec!["not injected: node 2 was not running".into()];
    let reports = measure(&[never], &record(), &findings(&[]));
    assert!(reports[0].problems[0].contains("not running"));
    assert_eq!(reports[0].injected_at_s, 0.0);
    assert_eq!(reports[0].unavailable_s, 0.0);
}

#[test]
fn bursty_acknowledgements_at_the_rate_count_as_recovered_and_a_burst_after_nothing_does_not() {
    let mut record = RunRecord {
        started_ns: T0,
        window_start_ns: T0 + 2 * SECOND_NS,
        window_end_ns: T0 + 24 * SECOND_NS,
        ..RunRecord::default()
    };
    let acks = [
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 3, 0, 0, 5384, 869, 3748, 770, 1259, 1009,
        1026, 981, 907, 1108, 1000, 1000, 1000,
    ];
    for (s, n) in acks.into_iter().enumerate() {
        record.keep(&row(s as u64, n, 3, 1));
    }
    let reports = measure(&[kill(None)], &record, &findings(&[]));
    // Seconds 14–18 average 1,009/s with none below half the rate.
    assert!(
        (reports[0].recovered_after_s.unwrap() - 3.8).abs() < 1e-9,
        "{:?}",
        reports[0].recovered_after_s
    );
}

#[test]
fn recovery_waits_for_a_producer_held_back_but_not_for_scheduling_noise() {
    let mut record = RunRecord {
        started_ns: T0,
        window_start_ns: T0 + 2 * SECOND_NS,
        window_end_ns: T0 + 26 * SECOND_NS,
        ..RunRecord::default()
    };
    // Lag 1 ms before the kill; still catching up (400, then 250 ms behind) in seconds 14
    // and 15 at the rate; then a busy host's 12–30 ms.
    for s in 0..26 {
        let (acknowledged, lag_ms) = match s {
            10 => (200, 1),
            11..=13 => (0, 3000),
            14 => (1000, 400),
            15 => (1000, 250),
            16.. => (1000, [12, 30, 20][s as usize % 3]),
            _ => (1000, 1),
        };
        record.keep(&row(s, acknowledged, 3, lag_ms));
    }
    let reports = measure(&[kill(None)], &record, &findings(&[]));
    assert!(
        (reports[0].recovered_after_s.unwrap() - 5.8).abs() < 1e-9,
        "back at second 16: {:?}",
        reports[0].recovered_after_s
    );
}

#[test]
fn the_notes_name_what_a_fault_made_and_leave_what_came_long_after() {
    let gaps = [(T0 + 10_150_000_000, T0 + 14_050_000_000)];
    let reports = measure(
        &[kill(Some(T0 + 13_200_000_000))],
        &record(),
        &findings(&gaps),
    );
    // 11: the stall while node 2 was down; 14: the catch-up after its restart, before the
    // rate was back at 15; 25: the broker's own.
    let events = Events {
        stalls: vec![11.0],
        slowdowns: vec![14.0, 25.0],
        ..Events::default()
    };
    let notes: Vec<_> = reports.iter().filter_map(|r| note(r, &events)).collect();
    assert_eq!(
        notes,
        ["FAULT 1 (kill of node 2 (pid 4242)): made the STALL at 11.0 s and the SLOW seconds at 14 s: the fault's doing, not the broker's own or the client's"]
    );
    let mut lossy = reports[0].clone();
    lossy.during.lost = Some(20_132);
    assert!(note(&lossy, &events).unwrap().ends_with(
        "; 20,132 of the acknowledged messages due from its injection until it ended or the run recovered, whichever came later, were never received"
    ));
}
