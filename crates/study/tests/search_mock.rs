//! The maximum-sustainable-throughput search against the real engine and the in-memory mock
//! driver with an injected capacity: each step is a real open-loop run, judged from its
//! summary and its measured backlog exactly as `brokerbench study` judges a step.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use brokerbench_driver::mock::{MockDriver, MockFaults, MockSchema};
use brokerbench_engine::{run, RunControl};
use brokerbench_model::{load_specs, IntervalRow, Phase, RunObserver};
use brokerbench_study::search::{drive_observed, judge, FindSpec, Step};

/// Low enough that the generator offers twice it on a busy host too (the search's steps above
/// the capacity must fail for the broker's sake, not the generator's): the default search
/// steps 10K (held), 20K (failed), then bisects.
const CAPACITY: f64 = 12_000.0;

#[derive(Default)]
struct Backlog(Vec<(f64, f64)>);

impl RunObserver for Backlog {
    fn interval(&mut self, row: &IntervalRow) {
        if let (Phase::Measurement, Some(b)) = (row.phase, row.backlog) {
            self.0.push((row.second as f64, b as f64));
        }
    }
}

fn step(spec: &FindSpec, rate: f64) -> Step {
    let sets: Vec<String> = [
        format!("rate={rate}"),
        "warmup=1s".into(),
        "duration=2s".into(),
        "drain_timeout=2s".into(),
    ]
    .to_vec();
    let specs = load_specs(&[&MockSchema], None, None, &sets).unwrap();
    let faults = MockFaults {
        capacity: Some(CAPACITY),
        ..MockFaults::default()
    };
    let mut driver = MockDriver::new(faults, 1);
    let control = RunControl {
        run_id: format!("search-{rate}"),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let mut backlog = Backlog::default();
    let outcome = run(&specs.workload, &mut driver, &mut backlog, &control).unwrap();
    let summary = serde_json::to_value(&outcome.summary).unwrap();
    let verdict = judge(spec, rate, &summary, &backlog.0);
    Step::new(rate, &summary, verdict, String::new())
}

#[test]
fn the_search_finds_an_injected_capacity_within_5_percent_in_10_steps() {
    // The default settings, retries of nearly-held steps included, as `brokerbench study`
    // drives them.
    let spec = FindSpec::default();
    let mut tries = 0;
    let mut seen: Vec<usize> = Vec::new();
    let search = drive_observed(
        &spec,
        |rate, _, attempt| -> Result<Option<Step>, ()> {
            tries += 1;
            let s = step(&spec, rate);
            eprintln!(
                "offered {rate} (try {attempt}): achieved {:?}, sustainable {} {:?}",
                s.achieved, s.sustainable, s.reasons
            );
            Ok(Some(s))
        },
        |so_far| {
            seen.push(so_far.steps.len());
            Ok(())
        },
    )
    .unwrap();
    assert!(tries <= 15, "{tries} runs");
    // Each judged step is shown once, the search so far growing by one each time.
    let expected: Vec<usize> = (1..=search.steps.len()).collect();
    assert_eq!(seen, expected);
    let found = search.found_rate().expect("some step passed");
    assert!(
        (found - CAPACITY).abs() <= 0.05 * CAPACITY,
        "found {found}, capacity {CAPACITY}; steps {:?}",
        search
            .steps
            .iter()
            .map(|s| (s.offered, s.sustainable))
            .collect::<Vec<_>>()
    );
    assert!(search.steps.len() <= 10, "{} steps", search.steps.len());
    let fail = search.first_fail.expect("a step above the capacity failed");
    assert!(
        fail > CAPACITY,
        "the first failing rate {fail} is above the capacity"
    );
    // Steps above the capacity failed for a measured reason, not by assumption.
    let over = search
        .steps
        .iter()
        .find(|s| s.offered >= 1.5 * CAPACITY)
        .unwrap();
    assert!(
        !over.sustainable && !over.reasons.is_empty(),
        "{:?}",
        over.reasons
    );
    assert!(
        over.achieved.unwrap() < 1.05 * CAPACITY,
        "{:?}",
        over.achieved
    );
}
