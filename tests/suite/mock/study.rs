//! `brokerbench study` and `brokerbench compare` on the in-memory mock family: a grid with
//! repetitions and its statistics, resuming after SIGKILL, a refused changed study, a failing
//! run that does not stop the study, a search that ends with a bracket, bad study files
//! refused before anything runs, a faults axis. (A study's credentials: nats/study_secrets.rs;
//! a broker restarted between runs: kafka/study.rs.)

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{brokerbench, serial, wait_for_measured_seconds, write};

pub const QUICKSTART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/quickstart.yaml");

pub struct Study {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub folder: std::path::PathBuf,
}

pub fn study(dir: &Path, file: &Path, extra: &[&str]) -> Study {
    let folder = dir.join("out");
    let output = brokerbench()
        .current_dir(dir)
        .arg("study")
        .arg(file)
        .arg("--out")
        .arg(&folder)
        .args(extra)
        .timeout(Duration::from_secs(600))
        .output()
        .expect("brokerbench study runs");
    Study {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        folder,
    }
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// A CSV file as rows of column → text.
pub fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            headers
                .iter()
                .map(String::from)
                .zip(r.iter().map(String::from))
                .collect()
        })
        .collect()
}

fn number(v: &serde_json::Value, path: &str) -> f64 {
    path.split('.')
        .fold(v, |node, part| &node[part])
        .as_f64()
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// The short runs of a study, on the mock (an inline driver map of its defaults), without a
/// warm-up (the mock needs none).
pub fn short_sets() -> String {
    "driver: {driver: mock}\nset: {rate: 2000, warmup: 0s, duration: 1s, drain_timeout: 5s}".into()
}

#[test]
fn a_two_by_two_grid_with_two_repetitions_gives_8_runs_4_cells_and_their_statistics() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "grid.yaml",
        &format!(
            "name: grid\nworkload: {QUICKSTART}\n{}\naxes:\n  stamps_acknowledgements: [false, true]\n  partitions_per_topic: [1, 2]\nrepetitions: 2\n",
            short_sets()
        ),
    );
    let s = study(dir.path(), &file, &[]);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    assert_eq!(json(&s.folder.join("study.json"))["status"], "complete");
    let runs = csv_rows(&s.folder.join("runs.csv"));
    let cells = csv_rows(&s.folder.join("cells.csv"));
    assert_eq!(runs.len(), 8);
    assert_eq!(cells.len(), 4);
    assert!(runs.iter().all(|r| r["status"] == "complete"), "{runs:?}");
    // Interleaved: repetition 1 of every cell first.
    let order: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| (r["cell"].as_str(), r["repetition"].as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("1", "1"),
            ("2", "1"),
            ("3", "1"),
            ("4", "1"),
            ("1", "2"),
            ("2", "2"),
            ("3", "2"),
            ("4", "2")
        ]
    );
    // Statistics recomputed here from the runs' own summary.json files.
    for cell in &cells {
        let summaries: Vec<serde_json::Value> = runs
            .iter()
            .filter(|r| r["cell"] == cell["cell"])
            .map(|r| json(&s.folder.join(&r["results"]).join("summary.json")))
            .collect();
        assert_eq!(summaries.len(), 2);
        assert_eq!(cell["n"], "2");
        for path in ["throughput.acknowledged_per_s", "latency.publish.p99_ns"] {
            let values: Vec<f64> = summaries.iter().map(|v| number(v, path)).collect();
            let mean = (values[0] + values[1]) / 2.0;
            let stdev = ((values[0] - mean).powi(2) + (values[1] - mean).powi(2)).sqrt();
            // Student's t for 1 degree of freedom, two-sided 95%: 12.706.
            let half = 12.7062 * stdev / 2f64.sqrt();
            let read = |stat: &str| -> f64 { cell[&format!("{path}.{stat}")].parse().unwrap() };
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
            assert!(close(read("mean"), mean), "{path} mean");
            assert!(close(read("stdev"), stdev), "{path} stdev");
            assert!(close(read("min"), values[0].min(values[1])), "{path} min");
            assert!(close(read("max"), values[0].max(values[1])), "{path} max");
            assert!(close(read("ci95_low"), mean - half), "{path} ci95_low");
            assert!(close(read("ci95_high"), mean + half), "{path} ci95_high");
        }
    }
    // The JSON tables carry the same rows.
    assert_eq!(
        json(&s.folder.join("runs.json")).as_array().unwrap().len(),
        8
    );
    assert_eq!(
        json(&s.folder.join("cells.json")).as_array().unwrap().len(),
        4
    );
    assert!(s.stdout.contains("mean ± 95% CI"), "{}", s.stdout);

    // Compare two cells: ratios and the noise test.
    let a = format!("{}#1", s.folder.display());
    let b = format!("{}#4", s.folder.display());
    let out = brokerbench().args(["compare", &a, &b]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("acknowledged msg/s") && text.contains('×'),
        "{text}"
    );
    assert!(text.contains("noise"), "{text}");
    let out = brokerbench()
        .args(["compare", &a, &b, "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rate = doc["numbers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["number"] == "throughput.acknowledged_per_s")
        .unwrap();
    assert_eq!(rate["sides"][1]["stats"]["n"], 2);
    assert!(rate["sides"][1]["beyond_noise"].is_boolean(), "{rate}");
    // A run folder against a run folder.
    let r1 = s.folder.join(&runs[0]["results"]);
    let r2 = s.folder.join(&runs[1]["results"]);
    let out = brokerbench()
        .arg("compare")
        .arg(&r1)
        .arg(&r2)
        .output()
        .unwrap();
    assert!(out.status.success());
    // A study with four cells needs a cell number.
    let out = brokerbench()
        .arg("compare")
        .arg(&s.folder)
        .arg(&r1)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("#N"));
}

/// A `faults` axis: each cell runs its own schedule (here the user's own command), and the
/// tables carry the first fault's figures where it had one.
#[test]
fn a_faults_axis_gives_each_cell_its_schedule_and_the_tables_its_figures() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "faults.yaml",
        "name: faults-axis\ndriver: {driver: mock}\nset: {rate: 2000, warmup: 0s, duration: 3s, drain_timeout: 5s}\naxes:\n  faults:\n    - [{at: 1s, action: command, run: \"echo cut\", for: 1s}]\n    - []\n",
    );
    let s = study(dir.path(), &file, &[]);
    assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
    assert!(s.stdout.contains("unavailable (mean"), "{}", s.stdout);
    let runs = csv_rows(&s.folder.join("runs.csv"));
    let unavailable = |row: usize| runs[row]["faults.0.unavailable_s"].clone();
    assert!(unavailable(0).parse::<f64>().is_ok(), "{runs:?}");
    assert_eq!(unavailable(1), "", "no fault, no figure");
    let cells = csv_rows(&s.folder.join("cells.csv"));
    assert!(cells[0]["faults.0.unavailable_s.mean"]
        .parse::<f64>()
        .is_ok());
    let run = s.folder.join(&runs[0]["results"]);
    let log = std::fs::read_to_string(run.join("fault-1.log")).unwrap();
    assert!(log.contains("cut"), "{log}");
    let marked: Vec<String> = csv_rows(&run.join("timeseries.csv"))
        .iter()
        .map(|row| row["faults"].clone())
        .collect();
    assert!(marked.contains(&"1".to_string()), "{marked:?}");
    assert_eq!(marked.first().map(String::as_str), Some(""), "{marked:?}");
}

#[test]
fn a_killed_study_resumes_without_repeating_completed_runs_and_refuses_a_changed_file() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "name: resume\nworkload: {QUICKSTART}\n{}\naxes:\n  rate: [1000, 1500, 2000]\n",
        short_sets()
            .replace("rate: 2000, ", "")
            .replace("duration: 1s", "duration: 2s")
    );
    let file = write(dir.path(), "resume.yaml", &text);
    let folder = dir.path().join("out");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_brokerbench"))
        .current_dir(dir.path())
        .arg("study")
        .arg(&file)
        .arg("--out")
        .arg(&folder)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it while the second run is measuring, after the first completed.
    let status = |name: &str| -> Option<String> {
        let text =
            std::fs::read_to_string(folder.join("runs").join(name).join("manifest.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["status"].as_str().map(String::from)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(status("c001-r1").as_deref() == Some("complete")
        && wait_for_measured_seconds(&folder.join("runs/c002-r1"), 1))
    {
        assert!(
            Instant::now() < deadline,
            "the study did not reach its second run"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let first_started = json(&folder.join("runs/c001-r1/manifest.json"))["started_at_ns"].clone();
    // The run the study was carrying out dies with it (it does not run on as an orphan).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(status("c002-r1").as_deref(), Some("interrupted"));
    assert_eq!(json(&folder.join("study.json"))["status"], "running");

    let s = study(dir.path(), &file, &[]);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    assert!(s.stdout.contains("resuming"), "{}", s.stdout);
    assert_eq!(
        json(&folder.join("runs/c001-r1/manifest.json"))["started_at_ns"],
        first_started,
        "the completed run was not repeated"
    );
    let complete: Vec<String> = std::fs::read_dir(folder.join("runs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| status(n).as_deref() == Some("complete"))
        .collect();
    assert_eq!(complete.len(), 3, "{complete:?}");
    assert_eq!(
        status("c002-r1.try1").as_deref(),
        Some("interrupted"),
        "the killed attempt is kept aside"
    );
    let runs = csv_rows(&folder.join("runs.csv"));
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r["status"] == "complete"));
    assert_eq!(json(&folder.join("study.json"))["status"], "complete");

    // The same study with a changed file is refused, naming what changed.
    write(
        dir.path(),
        "resume.yaml",
        &text.replace("[1000, 1500, 2000]", "[1000, 1500, 3000]"),
    );
    let s = study(dir.path(), &file, &[]);
    assert_eq!(s.code, 2, "{}", s.stderr);
    assert!(
        s.stderr.contains("changed")
            && s.stderr.contains("axes.rate")
            && s.stderr.contains("--fresh"),
        "{}",
        s.stderr
    );
}

#[test]
fn a_run_the_broker_rejects_is_recorded_as_failed_and_the_study_goes_on() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "reject.yaml",
        &format!(
            "name: reject\nworkload: {QUICKSTART}\n{}\naxes:\n  refuse_setup: [true, false]\n",
            short_sets()
        ),
    );
    let s = study(dir.path(), &file, &[]);
    assert_eq!(s.code, 1, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    let runs = csv_rows(&s.folder.join("runs.csv"));
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["status"], "failed");
    assert!(runs[0]["error"].contains("refuse_setup"), "{:?}", runs[0]);
    assert_eq!(runs[1]["status"], "complete", "the study went on");
    let cells = csv_rows(&s.folder.join("cells.csv"));
    assert_eq!(cells.len(), 1, "only the complete cell has statistics");
    assert_eq!(cells[0]["refuse_setup"], "false");
}

#[test]
fn a_search_ends_with_a_bracket_around_the_brokers_capacity() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "find.yaml",
        &format!(
            "name: find\nworkload: {QUICKSTART}\ndriver: {{driver: mock, capacity: 30000}}\nset: {{rate: find}}\nfind: {{start: 10000, growth: 4, precision: 25%, max_steps: 5}}\n"
        ),
    );
    // While it goes, search.json shows the search so far after each judged step.
    let watched = dir.path().join("out").join("search.json");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || steps_seen_running(&watched, &done))
    };
    let s = study(
        dir.path(),
        &file,
        &["--quick", "--set", "warmup=0s", "--set", "duration=1s"],
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen_running = watcher.join().unwrap();
    assert!(
        s.code == 0 || s.code == 1,
        "stdout:\n{}\nstderr:\n{}",
        s.stdout,
        s.stderr
    );
    let search = json(&s.folder.join("search.json"));
    let steps = search["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 5, "{search}");
    let bracket = search["bracket"].as_array().unwrap();
    assert_eq!(bracket.len(), 2);
    let fail = bracket[1].as_f64().expect("some offered rate failed");
    for step in steps {
        let offered = step["offered"].as_f64().unwrap();
        let ok = step["sustainable"].as_bool().unwrap();
        assert_eq!(ok, step["reasons"].as_array().unwrap().is_empty(), "{step}");
        if ok {
            assert!(offered < fail, "{search}");
        }
    }
    if let Some(pass) = bracket[0].as_f64() {
        assert_eq!(search["found_rate"].as_f64(), Some(pass));
        assert!(pass < fail);
    }
    // Every try of every step is a row of the runs table (a nearly-held failing step is
    // measured again).
    let tries: usize = steps
        .iter()
        .map(|s| 1 + s["retried_because"].as_array().unwrap().len())
        .sum();
    assert_eq!(csv_rows(&s.folder.join("runs.csv")).len(), tries);
    assert!(s.stdout.contains("maximum sustainable rate") || s.stdout.contains("no offered rate"));
    let status = &search["searches"][0]["status"];
    assert!(status == "complete" || status == "failed", "{search}");
    assert_eq!(
        &search["status"], status,
        "a single search's status at the top"
    );
    let broker = &json(&s.folder.join("study.json"))["broker"];
    assert_eq!(broker["family"], "mock", "{broker}");
    if steps.len() > 1 {
        assert!(
            seen_running.contains(&1),
            "search.json showed the first step while the search went on: {seen_running:?}"
        );
    }
}

/// The numbers of steps search.json showed with the search `running`, read every 50 ms until
/// `done`.
fn steps_seen_running(file: &Path, done: &std::sync::atomic::AtomicBool) -> Vec<usize> {
    let mut seen = Vec::new();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        let read = std::fs::read_to_string(file).ok();
        if let Some(doc) = read.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()) {
            let search = &doc["searches"][0];
            let steps = search["steps"].as_array().map_or(0, Vec::len);
            if search["status"] == "running" && !seen.contains(&steps) {
                seen.push(steps);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

/// Each bad study exits 2 before any run, naming the file, the key and the fix.
#[test]
fn bad_study_files_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "axes: {producer_confg.acks: [\"1\"]}",
            "axis path",
            &["producer_confg", "did you mean `producer_config`"],
        ),
        ("axes: {rate: []}", "empty list", &["axes.rate", "empty"]),
        (
            "axes: {partitions_per_topic: [1, many]}",
            "wrong type",
            &["axis `partitions_per_topic`", "many"],
        ),
        (
            "repetitions: 0",
            "zero repetitions",
            &["repetitions", "at least 1"],
        ),
        (
            "axes: {driver: [no-such-driver.yaml]}",
            "missing driver file",
            &["axes.driver", "no-such-driver.yaml", "not found"],
        ),
        ("axes: {rate: 5}", "not a list", &["axes.rate", "list"]),
        ("ordr: shuffled", "unknown key", &["did you mean `order`"]),
    ];
    for (body, what, expected) in cases {
        let file = write(dir.path(), "bad.yaml", &format!("name: bad\n{body}\n"));
        let out = brokerbench()
            .current_dir(dir.path())
            .arg("study")
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(
            stderr.contains("bad.yaml"),
            "{what} names the file: {stderr}"
        );
        for e in *expected {
            assert!(stderr.contains(e), "{what}: expected `{e}` in: {stderr}");
        }
        assert!(
            !dir.path().join("studies").exists(),
            "{what}: nothing was created"
        );
    }
    // --dry-run lists every run after validating them, and creates nothing.
    write(
        dir.path(),
        "ok.yaml",
        "name: ok\naxes: {rate: [1000, 2000], producer_config.acks: [\"1\", all]}\nrepetitions: 3\n",
    );
    let out = brokerbench()
        .current_dir(dir.path())
        .args(["study", "ok.yaml", "--dry-run"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("4 cell(s), 12 runs"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.contains(" rep ")).count(), 12);
    // --cover: every value of each axis at least once, in two of the four cells.
    let out = brokerbench()
        .current_dir(dir.path())
        .args(["study", "ok.yaml", "--dry-run", "--cover"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("2 of the 4 cells"), "{stdout}");
    assert!(stdout.contains(", 6 runs"), "{stdout}");
    assert!(!dir.path().join("studies").exists());
}
