//! The results folder as the CLI uses it: create, observe rows, finish or fail or be killed;
//! then read every file back the way a user's tools would.

use std::fs;
use std::path::Path;

use base64::Engine as _;
use brokerbench_model::*;
use brokerbench_report::*;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

mod support;

use support::{row, summary, SECOND, START_NS};

fn manifest() -> Manifest {
    let mut manifest = Manifest::new("0.1.0", "run-1", START_NS);
    manifest.command = vec!["brokerbench".into(), "run".into(), "quickstart".into()];
    manifest.workload = serde_json::json!({"name": "quickstart", "rate": 1000});
    manifest.driver = serde_json::json!({
        "bootstrap_servers": "sasl://alice:hunter2@127.0.0.1:9092",
        "producer_config": {"acks": "all", "sasl.password": "hunter2"}
    });
    manifest.workload_source = "bundled:quickstart".into();
    manifest.driver_source = "defaults".into();
    manifest.broker = Some(BrokerInfo {
        address: "127.0.0.1:9092".into(),
        version: Some("4.1.1".into()),
        managed: true,
        nodes: Vec::new(),
        settings: Default::default(),
    });
    manifest
}

fn read_manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join(MANIFEST_FILE)).unwrap()).unwrap()
}

/// Intervals of an hlog as (start relative to BaseTime, histogram).
fn read_hlog(path: &Path) -> Vec<(f64, Histogram<u64>)> {
    let bytes = fs::read(path).unwrap();
    let mut deserializer = Deserializer::new();
    IntervalLogIterator::new(&bytes)
        .filter_map(|entry| match entry.unwrap() {
            LogEntry::Interval(interval) => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(interval.encoded_histogram())
                    .unwrap();
                let h = deserializer.deserialize(&mut raw.as_slice()).unwrap();
                Some((interval.start_timestamp().as_secs_f64(), h))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn complete_run_writes_every_file() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join(folder_name(START_NS, "quickstart"));
    assert!(dir.ends_with("20261122-031914-quickstart"));

    let mut folder = ResultsFolder::create(&dir, manifest()).unwrap();
    assert_eq!(folder.path(), dir);

    // While running: the manifest already says interrupted, with no end time.
    let during = read_manifest(&dir);
    assert_eq!(during["status"], "interrupted");
    assert!(during["ended_at"].is_null());
    assert_eq!(during["started_at"], "2026-11-22T03:19:14.000Z");
    assert_eq!(during["tool"]["name"], "brokerbench");
    assert_eq!(during["broker"]["version"], "4.1.1");
    let text = fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
    assert!(
        !text.contains("hunter2"),
        "secret leaked into manifest: {text}"
    );

    let rows = [
        row(0, Phase::Warmup, &[100, 200]),
        row(1, Phase::Measurement, &[100, 200, 300, 400]),
        row(2, Phase::Measurement, &[]),
        row(3, Phase::Drain, &[1_000]),
    ];
    {
        let mut live = LiveLine::new(false);
        let mut tee = Tee::new(vec![&mut folder, &mut live]);
        tee.phase_started(Phase::Warmup, START_NS);
        for r in &rows {
            tee.interval(r);
        }
    }
    folder
        .finish(
            &summary(RunStatus::Complete, 1000.0, 2.0),
            START_NS + 4 * SECOND,
        )
        .unwrap();

    let after = read_manifest(&dir);
    assert_eq!(after["status"], "complete");
    assert_eq!(after["ended_at"], "2026-11-22T03:19:18.000Z");
    assert_eq!(after["ended_at_ns"], START_NS + 4 * SECOND);
    assert!(after["error"].is_null());
    assert_eq!(after["driver"]["producer_config"]["sasl.password"], "***");

    let back: Summary = serde_json::from_slice(&fs::read(dir.join(SUMMARY_FILE)).unwrap()).unwrap();
    assert_eq!(back, summary(RunStatus::Complete, 1000.0, 2.0));

    let csv = fs::read_to_string(dir.join(TIMESERIES_FILE)).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + rows.len());
    assert_eq!(lines[0].split(',').collect::<Vec<_>>(), TIMESERIES_COLUMNS);
    assert!(lines[1].starts_with("0,warmup,1795317554.000,2,2,0,2,200,200,0,0.00,"));
    assert!(lines[3].starts_with("2,measurement,1795317556.000,0,"));
    assert!(
        lines[3].contains(",,,,,,,1.0"),
        "empty second has empty latency cells: {}",
        lines[3]
    );

    for (file, factor) in [(PUBLISH_HLOG_FILE, 1_000), (E2E_HLOG_FILE, 2_000)] {
        let intervals = read_hlog(&dir.join(file));
        assert_eq!(
            intervals.len(),
            rows.len(),
            "{file}: one line per second, empty ones too"
        );
        for (i, (start, h)) in intervals.iter().enumerate() {
            assert_eq!(*start, i as f64);
            let original = if factor == 1_000 {
                &rows[i].publish
            } else {
                &rows[i].end_to_end
            };
            assert_eq!(h.len(), original.len());
            assert_eq!(h.value_at_quantile(0.5), original.value_at_quantile(0.5));
        }
        assert_eq!(
            intervals[1].1.max(),
            intervals[1].1.highest_equivalent(400 * factor)
        );
    }
    // No temporary files left behind.
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "e2e.hlog",
            "manifest.json",
            "publish.hlog",
            "summary.json",
            "timeseries.csv"
        ]
    );
}

#[test]
fn killed_run_leaves_an_interrupted_readable_folder() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("run");
    let mut folder = ResultsFolder::create(&dir, manifest()).unwrap();
    folder.interval(&row(0, Phase::Measurement, &[100]));
    folder.interval(&row(1, Phase::Measurement, &[200]));
    // Simulate a kill: the process never reaches finish and never runs destructors.
    std::mem::forget(folder);

    let manifest = read_manifest(&dir);
    assert_eq!(manifest["status"], "interrupted");
    assert!(manifest["ended_at"].is_null());
    assert!(!dir.join(SUMMARY_FILE).exists());
    let csv = fs::read_to_string(dir.join(TIMESERIES_FILE)).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert_eq!(read_hlog(&dir.join(PUBLISH_HLOG_FILE)).len(), 2);
}

#[test]
fn failed_run_records_the_error() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("run");
    let folder = ResultsFolder::create(&dir, manifest()).unwrap();
    folder
        .mark_failed("broker 127.0.0.1:9092 unreachable", START_NS + SECOND)
        .unwrap();
    let manifest = read_manifest(&dir);
    assert_eq!(manifest["status"], "failed");
    assert_eq!(manifest["error"], "broker 127.0.0.1:9092 unreachable");
    assert_eq!(manifest["ended_at"], "2026-11-22T03:19:15.000Z");
}

#[test]
fn refuses_a_non_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("old.txt"), "x").unwrap();
    let error = ResultsFolder::create(dir.path(), manifest()).err().unwrap();
    let message = error.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("--out"), "{message}");

    // An existing empty folder is fine; a file is not.
    let empty = tempfile::tempdir().unwrap();
    ResultsFolder::create(empty.path(), manifest()).unwrap();
    let file = dir.path().join("old.txt");
    let error = ResultsFolder::create(&file, manifest()).err().unwrap();
    assert!(error.to_string().contains("not a folder"), "{error}");
}

#[test]
fn extra_exports_are_written_atomically() {
    struct Text;
    impl Export for Text {
        fn file_name(&self) -> &'static str {
            "summary.txt"
        }
        fn bytes(&self, summary: &Summary) -> std::io::Result<Vec<u8>> {
            Ok(terminal_summary(summary).into_bytes())
        }
    }
    let parent = tempfile::tempdir().unwrap();
    let folder = ResultsFolder::create(&parent.path().join("run"), manifest()).unwrap();
    let path = folder
        .write_export(&Text, &summary(RunStatus::Complete, 1000.0, 2.0))
        .unwrap();
    assert!(fs::read_to_string(path)
        .unwrap()
        .starts_with("quickstart on kafka"));
}
