use super::*;

fn step(offered: f64, ok: bool) -> Step {
    Step {
        offered,
        achieved: None,
        publish_p50_ns: None,
        publish_p99_ns: None,
        end_to_end_p50_ns: None,
        end_to_end_p99_ns: None,
        sustainable: ok,
        reasons: Vec::new(),
        results: String::new(),
        retried_because: Vec::new(),
        lost: 0.0,
    }
}

#[test]
fn ramps_then_bisects_to_the_precision() {
    let spec = FindSpec::default();
    let capacity = 40_000.0;
    let mut search = Search::new();
    while let Some(rate) = search.next_rate(&spec) {
        search.record(step(rate, rate <= capacity * 0.999));
    }
    let found = search.found_rate().unwrap();
    assert!(found <= capacity && found >= capacity * 0.95, "{found}");
    assert!(search.steps.len() <= 10, "{} steps", search.steps.len());
    let fail = search.first_fail.unwrap();
    assert!(fail - found <= 0.05 * found);
}

#[test]
fn ramps_down_when_the_start_fails() {
    let spec = FindSpec {
        start: 100_000.0,
        ..FindSpec::default()
    };
    let mut search = Search::new();
    while let Some(rate) = search.next_rate(&spec) {
        search.record(step(rate, rate <= 7_000.0));
    }
    let found = search.found_rate().unwrap();
    assert!((6_650.0..=7_000.0).contains(&found), "{found}");
}

#[test]
fn parses_find_and_names_bad_fields() {
    let v: Value = brokerbench_model::yaml::from_str(
        "{start: 5k, precision: 2%, step_duration: 10s, slo: {publish_p99: 20ms}}",
    )
    .unwrap();
    let spec = FindSpec::parse(&v).unwrap();
    assert_eq!(spec.start, 5000.0);
    assert_eq!(spec.precision, 0.02);
    assert_eq!(spec.slo[0].path, "latency.publish.p99_ns");
    assert_eq!(spec.slo[0].limit_ns, 20_000_000);
    let v: Value = brokerbench_model::yaml::from_str("{slo: {publish_p98: 1ms}}").unwrap();
    assert_eq!(FindSpec::parse(&v).unwrap_err().0, "slo.publish_p98");
    let v: Value = brokerbench_model::yaml::from_str("{strat: 1}").unwrap();
    assert!(FindSpec::parse(&v)
        .unwrap_err()
        .1
        .contains("did you mean `start`"));
}

#[test]
fn judges_each_criterion() {
    let spec =
        FindSpec::parse(&brokerbench_model::yaml::from_str("{slo: {publish_p99: 20ms}}").unwrap())
            .unwrap();
    let good = serde_json::json!({
        "status": "complete", "client_bound": false,
        "total": {"acknowledged": 100, "sent": 100},
        "window": {"failed": 0},
        "throughput": {"acknowledged_per_s": 995.0},
        "integrity": {"lost": 0},
        "latency": {"publish": {"count": 10, "p99_ns": 5_000_000}},
    });
    assert!(judge(&spec, 1000.0, &good, &[(0.0, 5.0), (1.0, 6.0), (2.0, 5.0)]).sustainable);
    let v = judge(
        &spec,
        1000.0,
        &good,
        &[(0.0, 0.0), (1.0, 50.0), (2.0, 100.0)],
    );
    assert!(
        !v.sustainable && v.reasons[0].contains("backlog grew 50"),
        "{v:?}"
    );
    let mut slow = good.clone();
    slow["latency"]["publish"]["p99_ns"] = Json::from(25_000_000u64);
    slow["throughput"]["acknowledged_per_s"] = Json::from(900.0);
    slow["client_bound"] = Json::from(true);
    let v = judge(&spec, 1000.0, &slow, &[]);
    assert_eq!(v.reasons.len(), 3, "{v:?}");
}
