//! A study's credentials, against a nats-server of the test's own that wants passwords (the
//! managed one wants none): none given any way reaches a file or the output, and a resumed
//! study reads them again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::mock::study::{csv_rows, json, Study, QUICKSTART};

/// A nats-server of the test's own that wants a user and password (the managed one wants
/// none), one user per way a study is given a credential: a run that did not get its
/// credential is refused. Stopped when dropped.
struct PasswordNats {
    server: std::process::Child,
    port: u16,
    http_port: u16,
    _dir: tempfile::TempDir,
}

impl PasswordNats {
    fn start(users: &[(&str, &str)]) -> PasswordNats {
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (port, http_port) = (free_port(), free_port());
        let dir = tempfile::tempdir().unwrap();
        let users: Vec<String> = users
            .iter()
            .map(|(user, password)| format!("{{user: {user}, password: \"{password}\"}}"))
            .collect();
        let config = write(
            dir.path(),
            "nats.conf",
            &format!(
                "listen: 127.0.0.1:{port}\nhttp: 127.0.0.1:{http_port}\njetstream {{\n  store_dir: \"{}\"\n}}\nauthorization {{\n  users = [{}]\n}}\n",
                dir.path().join("store").display(),
                users.join(", ")
            ),
        );
        let server = std::process::Command::new(nats_server_program())
            .arg("-c")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the managed NATS's nats-server");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        PasswordNats {
            server,
            port,
            http_port,
            _dir: dir,
        }
    }

    fn url(&self, user: &str, password: &str) -> String {
        format!("nats://{user}:{password}@127.0.0.1:{}", self.port)
    }
}

impl Drop for PasswordNats {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// `brokerbench study FILE --out DIR/out` with `environment` added (`None`: removed).
fn study_with(dir: &Path, file: &Path, environment: &[(&str, Option<&str>)]) -> Study {
    let folder = dir.join("out");
    let mut command = brokerbench();
    command
        .current_dir(dir)
        .arg("study")
        .arg(file)
        .arg("--out")
        .arg(&folder);
    for (name, value) in environment {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command
        .timeout(Duration::from_secs(300))
        .output()
        .expect("brokerbench study runs");
    Study {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        folder,
    }
}

/// Asserts that none of `secrets` is in the study's output or in any file of its folder
/// (its runs' folders included); returns the folder's files.
fn assert_no_secret(s: &Study, secrets: &[&str]) -> Vec<PathBuf> {
    let files = files_under(&s.folder);
    for secret in secrets {
        assert!(
            !s.stdout.contains(secret) && !s.stderr.contains(secret),
            "the output holds {secret}:\n{}\n{}",
            s.stdout,
            s.stderr
        );
        for path in &files {
            let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
            assert!(!text.contains(secret), "{} holds {secret}", path.display());
        }
    }
    files
}

const INLINE_PASSWORD: &str = "inl1ne-pw-7Hq2";

const FILE_PASSWORD: &str = "f1le-pw-9Xk4";

const SET_PASSWORD: &str = "s3t-pw-4Lm8";

const URL_TOKEN: &str = "urlt0ken-2Pz6";

const ENV_PASSWORD: &str = "env-pw-5Rt1";

const ALL_SECRETS: &[&str] = &[
    INLINE_PASSWORD,
    FILE_PASSWORD,
    SET_PASSWORD,
    URL_TOKEN,
    ENV_PASSWORD,
];

/// A study with an inline driver whose server URL holds a password and whose metrics URL
/// holds a token as its user; the metrics password comes from the environment.
fn inline_driver_study(dir: &Path, nats: &PasswordNats, cells: &str) -> PathBuf {
    write(
        dir,
        "inline.yaml",
        &format!(
            "name: inline-secrets\nworkload: {QUICKSTART}\ndriver:\n  driver: nats\n  servers: {}\n  broker_metrics: {{url: \"http://{URL_TOKEN}@127.0.0.1:{}\"}}\nset: {{rate: 500, warmup: 1s, duration: 1s, drain_timeout: 5s}}\naxes:\n  message_size: [{cells}]\n",
            nats.url("inline", INLINE_PASSWORD),
            nats.http_port
        ),
    )
}

#[test]
fn no_credential_given_any_way_reaches_a_file_or_the_output_of_a_study() {
    let _serial = serial();
    let nats = PasswordNats::start(&[("inline", INLINE_PASSWORD), ("file", FILE_PASSWORD)]);
    let dir = tempfile::tempdir().unwrap();
    let env = [("BROKERBENCH_METRICS_PASSWORD", Some(ENV_PASSWORD))];

    // An inline driver map (URL password, token as the URL's user), the environment.
    let file = inline_driver_study(dir.path(), &nats, "100, 200");
    let s = study_with(dir.path(), &file, &env);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    assert!(
        csv_rows(&s.folder.join("runs.csv"))
            .iter()
            .all(|r| r["status"] == "complete"),
        "the runs got the server's password"
    );
    let files = assert_no_secret(&s, ALL_SECRETS);
    for name in [
        "study.json",
        "runs.csv",
        "cells.csv",
        "report.html",
        "inputs/driver.yaml",
    ] {
        assert!(files.contains(&s.folder.join(name)), "{name}: {files:?}");
    }
    assert!(files.iter().any(|f| f.ends_with("c002-r1/manifest.json")));
    assert!(files.iter().any(|f| f.ends_with("c002-r1/run.log")));
    // Redacted, not dropped; and where the credentials come from, by name.
    let inputs = std::fs::read_to_string(s.folder.join("inputs/driver.yaml")).unwrap();
    assert!(
        inputs.contains("inline:***@") && inputs.contains("http://***@127.0.0.1"),
        "{inputs}"
    );
    let state = json(&s.folder.join("study.json"));
    assert!(
        state["definition"]["driver"]["servers"]
            .as_str()
            .is_some_and(|u| u.contains("inline:***@")),
        "{state}"
    );
    assert_eq!(state["secrets"]["study_file"], file.display().to_string());
    assert_eq!(
        state["secrets"]["environment"],
        serde_json::json!(["BROKERBENCH_METRICS_PASSWORD"])
    );

    // A driver file (URL password), the study's `set:` (the metrics password).
    let driver = write(
        dir.path(),
        "driver.yaml",
        &format!(
            "driver: nats\nservers: {}\nbroker_metrics: {{url: \"http://127.0.0.1:{}\"}}\n",
            nats.url("file", FILE_PASSWORD),
            nats.http_port
        ),
    );
    let file = write(
        dir.path(),
        "file.yaml",
        &format!(
            "name: file-secrets\nworkload: {QUICKSTART}\ndriver: driver.yaml\nset: {{rate: 500, warmup: 1s, duration: 1s, drain_timeout: 5s, broker_metrics.username: scraper, broker_metrics.password: {SET_PASSWORD}}}\n"
        ),
    );
    std::fs::remove_dir_all(dir.path().join("out")).unwrap();
    let s = study_with(dir.path(), &file, &[("BROKERBENCH_METRICS_PASSWORD", None)]);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    assert_no_secret(&s, ALL_SECRETS);
    let state = json(&s.folder.join("study.json"));
    assert_eq!(state["definition"]["set"]["broker_metrics.password"], "***");
    assert_eq!(
        state["secrets"]["driver_files"],
        serde_json::json!([driver.display().to_string()])
    );
    assert!(state["secrets"].get("environment").is_none(), "{state}");
}

#[test]
fn a_study_resumed_from_its_redacted_folder_reads_its_credentials_again() {
    let _serial = serial();
    let nats = PasswordNats::start(&[("inline", INLINE_PASSWORD)]);
    let dir = tempfile::tempdir().unwrap();
    let file = inline_driver_study(dir.path(), &nats, "100");
    let env = [("BROKERBENCH_METRICS_PASSWORD", Some(ENV_PASSWORD))];
    let s = study_with(dir.path(), &file, &env);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    // As if the run had been cut short: resuming must carry it out again.
    let run = s.folder.join("runs/c001-r1");
    std::fs::remove_dir_all(&run).unwrap();

    // Without the variable the earlier runs used: refused, naming it and how to supply it.
    let s = study_with(dir.path(), &file, &[("BROKERBENCH_METRICS_PASSWORD", None)]);
    assert_eq!(s.code, 2, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    assert!(
        s.stderr.contains("BROKERBENCH_METRICS_PASSWORD is not set")
            && s.stderr.contains("export BROKERBENCH_METRICS_PASSWORD=")
            && s.stderr.contains("--fresh"),
        "{}",
        s.stderr
    );
    assert!(!run.exists(), "nothing ran");

    // With it: the server's password is read again from the study file.
    let s = study_with(dir.path(), &file, &env);
    assert_eq!(s.code, 0, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    assert!(s.stdout.contains("resuming"), "{}", s.stdout);
    assert_eq!(json(&run.join("manifest.json"))["status"], "complete");
    assert_no_secret(&s, ALL_SECRETS);
}
