//! The names of a comparison's runs: two folders both called `out` must come out as two
//! different names that say what differs, and `--label` must be one per input.

use brokerbench_report::*;
use serde_json::{json, Value as Json};

/// A manifest as `brokerbench run` writes its workload and driver sections.
fn manifest(family: &str, workload: &str, rate: u64, acks: &str) -> Json {
    json!({
        "run_id": format!("{family}-{rate}-{acks}"),
        "started_at": "2026-11-25T09:00:00.000Z",
        "workload": {"name": workload, "topics": 1, "message_size": 100, "rate": rate as f64,
            "warmup": "1s", "duration": "3s", "payload": {"kind": "random", "pool": 1000}},
        "driver": {"driver": family, "bootstrap_servers": "127.0.0.1:9092",
            "producer_config": {"acks": acks, "linger.ms": "1"}},
    })
}

fn run(name: &str, manifest: Json) -> RunToName {
    RunToName::folder(std::path::Path::new(name), Some(manifest))
}

fn labels(runs: &[RunToName]) -> Vec<String> {
    comparison_labels(runs, &[]).unwrap()
}

#[test]
fn two_out_folders_are_named_by_the_setting_that_differs() {
    let runs = [
        run("/tmp/a/out", manifest("kafka", "quickstart", 50000, "all")),
        run("/tmp/b/out", manifest("kafka", "quickstart", 20000, "all")),
    ];
    assert_eq!(labels(&runs), ["rate=50000", "rate=20000"]);
}

#[test]
fn a_nested_driver_setting_is_named_by_its_dotted_key() {
    let runs = [
        run("out", manifest("kafka", "quickstart", 50000, "1")),
        run("out", manifest("kafka", "quickstart", 50000, "all")),
    ];
    assert_eq!(
        labels(&runs),
        ["producer_config.acks=1", "producer_config.acks=all"]
    );
}

#[test]
fn families_and_workloads_are_named_and_other_families_settings_are_not() {
    let mut nats = manifest("nats", "max-rate", 50000, "all");
    nats["driver"] =
        json!({"driver": "nats", "url": "nats://127.0.0.1:4222", "stream": {"replicas": 1}});
    let runs = [
        run("out", manifest("kafka", "quickstart", 50000, "all")),
        run("out", nats),
    ];
    assert_eq!(labels(&runs), ["kafka · quickstart", "nats · max-rate"]);
}

#[test]
fn a_setting_left_at_its_default_reads_default() {
    let mut with_backlog = manifest("kafka", "quickstart", 50000, "all");
    with_backlog["workload"]["backlog"] = json!({"size": "1GiB"});
    let runs = [
        run("out", manifest("kafka", "quickstart", 50000, "all")),
        run("out", with_backlog),
    ];
    assert_eq!(
        labels(&runs),
        ["backlog=default", "backlog={\"size\":\"1GiB\"}"]
    );
}

#[test]
fn many_differences_are_cut_to_three_and_counted() {
    let mut other = manifest("kafka", "quickstart", 20000, "1");
    other["workload"]["topics"] = json!(4);
    other["workload"]["message_size"] = json!(1024);
    let runs = [
        run("out", manifest("kafka", "quickstart", 50000, "all")),
        run("out", other),
    ];
    assert_eq!(
        labels(&runs),
        [
            "topics=1, message_size=100, rate=50000, +1 more",
            "topics=4, message_size=1024, rate=20000, +1 more"
        ]
    );
}

#[test]
fn folder_names_a_person_chose_are_kept_when_they_differ() {
    let runs = [
        run("/r/acks-one", manifest("kafka", "quickstart", 50000, "1")),
        run("/r/acks-all", manifest("kafka", "quickstart", 50000, "all")),
    ];
    assert_eq!(labels(&runs), ["acks-one", "acks-all"]);
}

#[test]
fn generated_folder_names_give_way_to_what_differs() {
    let stamp = folder_name(1_795_317_554_000_000_000, "quickstart");
    let later = folder_name(1_795_317_600_000_000_000, "quickstart");
    assert!(generated_folder_name(&stamp), "{stamp}");
    let runs = [
        run(&stamp, manifest("kafka", "quickstart", 50000, "all")),
        run(&later, manifest("kafka", "quickstart", 20000, "all")),
    ];
    assert_eq!(labels(&runs), ["rate=50000", "rate=20000"]);
    // With nothing different, the time stamps tell them apart.
    let same = [
        run(&stamp, manifest("kafka", "quickstart", 50000, "all")),
        run(&later, manifest("kafka", "quickstart", 50000, "all")),
    ];
    assert_eq!(labels(&same), [stamp, later]);
}

#[test]
fn brokerbench_s_own_names_are_recognised() {
    for name in [
        "20261122-031914-quickstart",
        "20261122-031914",
        "c001-r1",
        "c012-r3-s01",
        "quickstart-9f3a-merged",
    ] {
        assert!(generated_folder_name(name), "{name}");
    }
    for name in ["out", "acks-all", "c1", "2026-run", "kafka-3-nodes"] {
        assert!(!generated_folder_name(name), "{name}");
    }
}

#[test]
fn identical_runs_in_same_named_folders_are_numbered() {
    let runs = [
        run("/a/out", manifest("kafka", "quickstart", 50000, "all")),
        run("/b/out", manifest("kafka", "quickstart", 50000, "all")),
        run("/c/out", manifest("kafka", "quickstart", 20000, "all")),
    ];
    assert_eq!(
        labels(&runs),
        ["rate=50000 #1", "rate=50000 #2", "rate=20000"]
    );
    let same = [
        run("/a/out", manifest("kafka", "quickstart", 50000, "all")),
        run("/b/out", manifest("kafka", "quickstart", 50000, "all")),
    ];
    assert_eq!(labels(&same), ["out #1", "out #2"]);
}

#[test]
fn given_labels_are_used_one_per_input() {
    let runs = [
        run("out", manifest("kafka", "quickstart", 50000, "all")),
        run("out", manifest("kafka", "quickstart", 20000, "all")),
    ];
    let given = ["fast".to_string(), "slow".to_string()];
    assert_eq!(comparison_labels(&runs, &given).unwrap(), given);
    assert_eq!(
        comparison_labels(&runs, &given[..1]),
        Err(LabelError::Count {
            given: 1,
            inputs: 2
        })
    );
    let twice = ["fast".to_string(), "fast".to_string()];
    assert_eq!(
        comparison_labels(&runs, &twice),
        Err(LabelError::Repeated("fast".into()))
    );
    let message = LabelError::Count {
        given: 1,
        inputs: 2,
    }
    .to_string();
    assert!(message.contains("once per input"), "{message}");
}
