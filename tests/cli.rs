//! The command line without a broker: help, validation, data generation.

mod common;

use common::*;

#[test]
fn validate_accepts_the_bundled_files() {
    let root = env!("CARGO_MANIFEST_DIR");
    brokerbench()
        .args([
            "validate",
            &format!("{root}/workloads/quickstart.yaml"),
            &format!("{root}/workloads/drivers/kafka.yaml"),
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("valid workload file"))
        .stdout(predicates::str::contains("valid driver file"));
}

#[test]
fn validate_rejects_a_bad_file_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "w.yaml", "arrival: poison\n");
    brokerbench()
        .arg("validate")
        .arg(&file)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("arrival"))
        .stderr(predicates::str::contains("did you mean `poisson`?"));
}

#[test]
fn an_empty_or_missing_file_exits_2_saying_why_once() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(dir.path(), "empty.yaml", "# nothing yet\n");
    brokerbench()
        .arg("run")
        .arg(&empty)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("empty.yaml is empty"))
        .stderr(predicates::str::contains("`{}` for all defaults"));
    let output = brokerbench()
        .args(["run", "no-such-workload.yaml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no-such-workload.yaml"), "{stderr}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "the cause once: {stderr}"
    );
}

#[test]
fn a_bad_override_exits_2() {
    brokerbench()
        .args(["run", "--set", "rtae=5"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("did you mean `rate`?"));
}

#[test]
fn a_driver_on_standard_input_is_checked_like_a_driver_file() {
    brokerbench()
        .args(["run", "--driver", "-"])
        .write_stdin("driver: nats\nstorage: flie\n")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("driver file on standard input"))
        .stderr(predicates::str::contains("storage"));
    brokerbench()
        .args(["run", "--driver", "-"])
        .write_stdin("driver: [nats\n")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--driver -"))
        .stderr(predicates::str::contains("not valid YAML"));
}

#[test]
fn a_missing_data_file_exits_2_before_touching_a_broker() {
    brokerbench()
        .args([
            "run",
            "--set",
            "payload={kind: file, path: /nonexistent/x.tsv}",
            "--set",
            "bootstrap_servers=127.0.0.1:1",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("payload.path"));
}

#[test]
fn data_generate_writes_sensor_records() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.tsv");
    brokerbench()
        .args(["data", "generate", "--records", "100", "--out"])
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 100);
    assert!(text.lines().all(|l| l.split('\t').count() == 66));
}

#[test]
fn a_label_count_that_does_not_match_the_inputs_exits_2_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp.html");
    let (a, b) = (dir.path().join("A/out"), dir.path().join("B/out"));
    let output = brokerbench()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .args(["--label", "only-one", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("2 inputs but 1 --label"), "{stderr}");
    assert!(!out.exists(), "nothing is written");
    brokerbench()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .args(["--label", "x", "--label", "y", "--label", "z"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("2 inputs but 3 --label"));
    brokerbench()
        .arg("report")
        .arg(&a)
        .args(["--label", "x"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("two or more run folders"));
}

#[test]
fn rate_find_on_run_prints_the_study_that_searches_and_that_study_plans() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let workload = format!("{root}/workloads/quickstart.yaml");
    let driver = format!("{root}/workloads/drivers/kafka.yaml");
    for files in [vec![], vec![workload.as_str(), "--driver", driver.as_str()]] {
        let output = brokerbench()
            .current_dir(dir.path())
            .arg("run")
            .args(&files)
            .args(["--set", "rate=find", "--set", "duration=2s"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("is a study, not one run"), "{stderr}");
        let (_, rest) = stderr.split_once("in this folder:\n\n").expect(&stderr);
        let (lines, command) = rest.split_once("\n\nand run: ").expect(&stderr);
        let study: String = lines
            .lines()
            .map(|l| format!("{}\n", l.trim_start()))
            .collect();
        assert!(study.contains("set: {rate: find}"), "{study}");
        assert_eq!(
            study.contains("workload:") && study.contains("driver:"),
            !files.is_empty(),
            "{study}"
        );
        let command = command.lines().next().unwrap();
        assert_eq!(
            command,
            "brokerbench study find-rate.yaml --set duration=2s"
        );
        write(dir.path(), "find-rate.yaml", &study);
        // The printed study, saved where it says, plans one search (no broker needed).
        let planned = brokerbench()
            .current_dir(dir.path())
            .args([
                "study",
                "find-rate.yaml",
                "--set",
                "duration=2s",
                "--dry-run",
            ])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&planned.stdout);
        assert!(
            planned.status.success(),
            "{study}{out}{}",
            String::from_utf8_lossy(&planned.stderr)
        );
        assert!(out.contains("1 searches"), "{out}");
    }
}
