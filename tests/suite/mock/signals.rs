//! Ctrl-C, SIGTERM and SIGKILL of a run, on the in-memory mock family: what is written, and
//! how each leaves the results folder.

use std::time::{Duration, Instant};

use crate::common::*;

/// Starts `brokerbench run --quiet` with `sets` writing into a new folder; the child, the
/// folder and the temporary directory that holds it.
fn spawn_run(sets: &[&str]) -> (std::process::Child, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let folder = results_folder(dir.path());
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("brokerbench"));
    command.args(["run", "--quiet", "--set", "driver=mock"]);
    for set in sets {
        command.args(["--set", set]);
    }
    let child = command
        .arg("--out")
        .arg(&folder)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, folder, dir)
}

/// Waits until the run writing `folder` has written its first row (of any phase).
fn wait_for_first_row(folder: &std::path::Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let rows = std::fs::read_to_string(folder.join("timeseries.csv"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if rows >= 2 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn json_file(folder: &std::path::Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(folder.join(name)).unwrap()).unwrap()
}

/// Sends `signal` once the run has measured 2 s; checks the drain, the files and the marks.
fn stopped_in_measurement_by(signal: i32) {
    let (mut child, folder, _dir) = spawn_run(&["rate=1000", "warmup=1s", "duration=60s"]);
    // 2 s into the measurement, counted from the run's own rows.
    let measuring = wait_for_measured_seconds(&folder, 2);
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(measuring, "the run never measured 2 s");
    assert_eq!(status.code(), Some(130));
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
    let summary = json_file(&folder, "summary.json");
    assert_eq!(summary["status"], "interrupted");
    assert!(summary["total"]["acknowledged"].as_u64().unwrap() > 1000);
    assert_eq!(summary["integrity"]["lost"], 0);
}

#[test]
fn ctrl_c_drains_writes_everything_and_marks_the_run_interrupted() {
    let _turn = serial();
    stopped_in_measurement_by(libc::SIGINT);
}

#[test]
fn sigterm_is_taken_as_ctrl_c() {
    let _turn = serial();
    stopped_in_measurement_by(libc::SIGTERM);
}

#[test]
fn ctrl_c_in_the_warm_up_still_writes_a_summary() {
    let _turn = serial();
    let (mut child, folder, _dir) = spawn_run(&["rate=1000", "warmup=60s", "duration=10s"]);
    assert!(wait_for_first_row(&folder), "the run never wrote a row");
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let summary = json_file(&folder, "summary.json");
    assert_eq!(summary["status"], "interrupted", "{summary:#}");
    assert_eq!(summary["integrity"]["lost"], 0, "{summary:#}");
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
}

#[test]
fn a_second_ctrl_c_while_draining_ends_the_run_at_once() {
    let _turn = serial();
    // The broker stops acknowledging 2 s into the run, for longer than the drain waits: the
    // drain after the first Ctrl-C waits for the messages in flight.
    let (mut child, folder, _dir) = spawn_run(&[
        "rate=1000",
        "warmup=1s",
        "duration=60s",
        "drain_timeout=30s",
        "stall={at: 2s, for: 120s}",
    ]);
    assert!(wait_for_first_row(&folder), "the run never wrote a row");
    let lateness = WakeupLateness::start();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first Ctrl-C drains: the run is still waiting for its messages"
    );
    let second = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    let late = lateness.worst();
    assert!(
        second.elapsed() < Duration::from_secs(2) + late * 4,
        "took {:?} (the host woke threads up to {late:?} late)",
        second.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    // Left as a folder marked interrupted, with the rows written so far.
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
    let rows = std::fs::read_to_string(folder.join("timeseries.csv")).unwrap();
    assert!(rows.lines().count() >= 2, "{rows}");
}

#[test]
fn a_killed_run_leaves_a_folder_marked_interrupted_with_its_rows() {
    let _turn = serial();
    let (mut child, folder, _dir) = spawn_run(&["rate=1000", "warmup=1s", "duration=60s"]);
    let measuring = wait_for_measured_seconds(&folder, 2);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(measuring, "the run never measured 2 s");
    assert_eq!(json_file(&folder, "manifest.json")["status"], "interrupted");
    assert!(
        !folder.join("summary.json").exists(),
        "no summary for a killed run"
    );
    let rows = std::fs::read_to_string(folder.join("timeseries.csv")).unwrap();
    assert!(
        rows.lines().count() >= 4,
        "the rows written so far are kept: {rows}"
    );
    // The report of what there is can still be made.
    let report = brokerbench()
        .args(["report"])
        .arg(&folder)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    assert!(folder.join("report.html").exists());
}
