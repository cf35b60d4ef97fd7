//! The command line without a broker: help, validation, data generation.

use crate::common::*;

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

/// Every command and subcommand, each with its long help's examples (`  brokerbench …` lines).
fn commands_with_examples() -> Vec<(String, Vec<String>)> {
    fn walk(command: &clap::Command, path: String, into: &mut Vec<(String, Vec<String>)>) {
        let help = command
            .get_after_long_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        let examples = help
            .lines()
            .filter_map(|l| l.strip_prefix("  "))
            .filter(|l| l.starts_with("brokerbench"))
            .map(str::to_string)
            .collect();
        into.push((path.clone(), examples));
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, format!("{path} {}", sub.get_name()), into);
        }
    }
    let mut all = Vec::new();
    walk(
        &<brokerbench::cli::Cli as clap::CommandFactory>::command(),
        "brokerbench".into(),
        &mut all,
    );
    all
}

#[test]
fn every_command_has_examples_that_parse_and_name_files_that_exist() {
    use clap::Parser;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    let all = commands_with_examples();
    for (command, examples) in &all {
        if examples.is_empty() {
            wrong.push(format!("{command}: no examples at the end of its --help"));
        }
        for example in examples {
            let words = shlex::split(example).expect("balanced quotes");
            if let Err(e) = brokerbench::cli::Cli::try_parse_from(&words) {
                wrong.push(format!(
                    "{command}: `{example}`: {}",
                    e.to_string().lines().next().unwrap_or_default()
                ));
            }
            for file in words.iter().filter(|w| w.ends_with(".yaml")) {
                if !root.join(file).is_file() {
                    wrong.push(format!(
                        "{command}: `{example}` names {file}, which is not in the repository"
                    ));
                }
            }
        }
    }
    assert!(all.len() >= 14, "only {} commands found", all.len());
    assert!(wrong.is_empty(), "help examples:\n{}", wrong.join("\n"));
}

#[test]
fn the_help_examples_that_only_read_files_succeed() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut ran = 0;
    for (_, examples) in commands_with_examples() {
        for example in examples {
            let words = shlex::split(&example).unwrap();
            let cheap = words[1] == "validate" || words.iter().any(|w| w == "--dry-run");
            if cheap {
                ran += 1;
                brokerbench()
                    .current_dir(root)
                    .args(&words[1..])
                    .assert()
                    .success();
            }
        }
    }
    assert!(ran >= 2, "only {ran} examples ran");
}

#[test]
fn the_bash_completion_completes_commands_families_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("brokerbench.bash");
    let printed = brokerbench()
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(printed.status.success());
    std::fs::write(&script, printed.stdout).unwrap();
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
             _brokerbench brokerbench '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len().saturating_sub(2)],
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(program)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(complete("brokerbench br").lines().any(|l| l == "broker"));
    let families = complete("brokerbench broker up ");
    for family in ["kafka", "rabbitmq", "nats"] {
        assert!(
            families.lines().any(|l| l == family),
            "{family} not offered: {families}"
        );
    }
    assert!(complete("brokerbench study --dr")
        .lines()
        .any(|l| l == "--dry-run"));
}

#[test]
fn every_shell_gets_a_completion_script() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = brokerbench().args(["completions", shell]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success() && text.contains("dry-run"),
            "{shell}: {text}"
        );
    }
    brokerbench().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn the_man_pages_render_with_their_examples() {
    let dir = tempfile::tempdir().unwrap();
    brokerbench()
        .arg("man")
        .arg("--out")
        .arg(dir.path())
        .assert()
        .success();
    let pages: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        pages.len(),
        commands_with_examples().len(),
        "one page per command: {pages:?}"
    );
    for page in pages {
        let out = std::process::Command::new("man")
            .args(["--warnings=all", "-l"])
            .arg(&page)
            .env("MANWIDTH", "100")
            .output()
            .expect("man (man-db) is installed by scripts/setup");
        let text = without_overstrikes(&String::from_utf8_lossy(&out.stdout));
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.trim().is_empty(),
            "{}: {warnings}",
            page.display()
        );
        assert!(
            text.contains("EXAMPLES") && text.contains("SYNOPSIS"),
            "{}:\n{text}",
            page.display()
        );
    }
    let top = brokerbench().arg("man").output().unwrap();
    assert!(String::from_utf8_lossy(&top.stdout).contains("\n.TH brokerbench 1 "));
}

/// man's bold and underline as plain text: a character followed by a backspace is struck over.
fn without_overstrikes(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{8}' => {
                plain.pop();
            }
            c => plain.push(c),
        }
    }
    plain
}

#[test]
fn bad_faults_exit_2_naming_the_field_before_anything_runs() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--fault", "at=1s,action=explode,node=1"],
            "faults[0].action",
        ),
        (
            &["--fault", "at=40s,action=kill,node=1"],
            "past the 30s measurement window",
        ),
        (&["--fault", "at=1s,action=pause,node=1"], "faults[0].for"),
        (
            &["--fault", "at=1s,action=partition,node=1,for=2s"],
            "a partition cuts a node off from the others",
        ),
        (&["--fault", "at 1s"], "KEY=VALUE pairs"),
    ];
    for (args, says) in cases {
        brokerbench()
            .arg("run")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
    }
    // A kill needs the managed broker: refused before connecting to one named in the file.
    brokerbench()
        .args([
            "run",
            "--set",
            "driver=nats",
            "--set",
            "servers=nats://127.0.0.1:1",
        ])
        .args(["--fault", "at=1s,action=kill,node=1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("use action: command"));
}

/// Output into a pipe whose reader is gone (`brokerbench completions bash | head -1`) ends the
/// command quietly, by SIGPIPE as Unix tools end, not with a panic on stderr.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::ExitStatusExt;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills both descriptors; the read end is closed at once, so the write
    // end given to the command is a pipe with no reader from the start.
    let write_end = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        std::os::fd::OwnedFd::from_raw_fd(fds[1])
    };
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("brokerbench"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::from(write_end))
        .output()
        .unwrap();
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
