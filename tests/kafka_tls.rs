//! Kafka over TLS, end to end: the managed broker started with `broker up kafka --tls` (SSL and
//! SASL_SSL listeners, a SASL user, a throwaway CA), the driver file `broker status kafka
//! --driver-file` prints, clean runs over SSL and over SASL_SSL with PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512, a wrong password and an untrusted certificate refused at once with what to
//! fix, and no secret in anything a TLS run writes. Its own test binary: when the shared
//! managed Kafka runs without TLS it is restarted with it (TLS then stays on for later starts
//! of that home; its PLAINTEXT listener is unchanged, so the other tests do not notice).

mod common;

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;

/// The managed Kafka with TLS on: the driver file for its SASL_SSL listener, and the password.
fn tls_kafka() -> &'static (String, String) {
    static DRIVER: OnceLock<(String, String)> = OnceLock::new();
    DRIVER.get_or_init(|| {
        kafka();
        let up = || {
            brokerbench()
                .args(["broker", "up", "kafka", "--tls"])
                .timeout(Duration::from_secs(180))
                .output()
                .unwrap()
        };
        let mut output = up();
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stderr).into_owned();
            assert!(said.contains("without TLS"), "{said}");
            let down = brokerbench()
                .args(["broker", "down", "kafka"])
                .timeout(Duration::from_secs(60))
                .output()
                .unwrap();
            assert!(down.status.success(), "{down:?}");
            output = up();
        }
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{output:?}");
        assert!(
            printed.contains("SASL_SSL 127.0.0.1:") && printed.contains("ca.pem"),
            "{printed}"
        );
        let file = brokerbench()
            .args(["broker", "status", "kafka", "--driver-file"])
            .output()
            .unwrap();
        assert!(file.status.success(), "{file:?}");
        let text = String::from_utf8(file.stdout).unwrap();
        let password = text
            .lines()
            .find_map(|line| line.trim().strip_prefix("sasl.password: "))
            .unwrap_or_else(|| panic!("no sasl.password in the driver file:\n{text}"))
            .to_string();
        assert!(password.len() >= 16, "{password}");
        (text, password)
    })
}

/// Runs a short lossless run with `driver` (a driver file's text) and `extra` settings.
fn run_with(driver: &str, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "driver.yaml", driver);
    let mut sets = short("2000", 2);
    sets.extend(extra.iter().map(|s| s.to_string()));
    run_in(
        dir,
        &with_sets(&sets, &["--driver", file.to_str().unwrap()]),
    )
}

#[test]
fn runs_over_sasl_ssl_with_each_mechanism_and_over_ssl_are_clean() {
    let _turn = serial();
    let (driver, _) = tls_kafka();
    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] {
        let run = run_with(
            driver,
            &[&format!("common_config.sasl.mechanisms={mechanism}")],
        );
        let s = assert_lossless(&run);
        assert!(
            s["total"]["sent"].as_u64().unwrap() >= 4000,
            "{mechanism}: {s:#}"
        );
    }
    // The SSL listener (no SASL) is on the port before SASL_SSL's.
    let sasl_port: u16 = driver
        .lines()
        .find_map(|line| line.strip_prefix("bootstrap_servers: 127.0.0.1:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ca = driver
        .lines()
        .find_map(|line| line.trim().strip_prefix("ssl.ca.location: "))
        .unwrap();
    let ssl = format!(
        "driver: kafka\nbootstrap_servers: 127.0.0.1:{}\ncommon_config: {{security.protocol: SSL, ssl.ca.location: '{ca}'}}\nproducer_config: {{acks: '1'}}\n",
        sasl_port - 1
    );
    assert_lossless(&run_with(&ssl, &[]));
}

#[test]
fn a_wrong_password_is_refused_at_once_naming_the_user_not_the_password() {
    let _turn = serial();
    let (driver, password) = tls_kafka();
    let wrong = driver.replace(password.as_str(), "Zq7-wrong-password");
    let started = Instant::now();
    let run = run_with(&wrong, &[]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("refused the credentials")
            && run.stderr.contains("user `brokerbench`")
            && run.stderr.contains("SCRAM-SHA-512")
            && run.stderr.contains("sasl.password"),
        "{}",
        run.stderr
    );
    for secret in ["Zq7", password.as_str()] {
        assert!(!run.stderr.contains(secret) && !run.stdout.contains(secret));
    }
}

#[test]
fn an_untrusted_certificate_is_refused_at_once_naming_the_setting() {
    let _turn = serial();
    let (driver, _) = tls_kafka();
    // A CA of another home: valid, but not the one that signed the broker's certificate.
    let other = tempfile::tempdir().unwrap();
    let foreign = brokerbench_brokers::tls::TlsFiles::of(other.path());
    foreign.generate_once().unwrap();
    let ca_line = driver
        .lines()
        .find(|line| line.trim().starts_with("ssl.ca.location: "))
        .unwrap();
    let untrusted = driver.replace(
        ca_line,
        &format!("  ssl.ca.location: {}", foreign.ca().display()),
    );
    let started = Instant::now();
    let run = run_with(&untrusted, &[]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("TLS handshake failed")
            && run.stderr.contains("certificate verify failed")
            && run.stderr.contains("ssl.ca.location"),
        "{}",
        run.stderr
    );
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn no_secret_reaches_any_output_of_a_tls_run() {
    let _turn = serial();
    let (driver, password) = tls_kafka();
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "driver.yaml", driver);
    let folder = dir.path().join("run");
    let omb = dir.path().join("omb-result.json");
    let output = brokerbench()
        .arg("run")
        .args(with_sets(&short("2000", 2), &[]))
        .args(["--driver", file.to_str().unwrap()])
        .args(["--broker-process", "kafka.Kafka"])
        .arg("--out")
        .arg(&folder)
        .arg("--omb-result")
        .arg(&omb)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains(password.as_str()) && !stderr.contains(password.as_str()));
    let mut files = files_under(&folder);
    files.push(omb);
    assert!(
        files.iter().any(|f| f.ends_with("report.html"))
            && files.iter().any(|f| f.ends_with("manifest.json"))
            && files.iter().any(|f| f.ends_with("omb-result.json")),
        "{files:?}"
    );
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(password.as_str()),
            "{} holds the SASL password",
            path.display()
        );
    }
    let manifest = std::fs::read_to_string(folder.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"sasl.password\": \"***\"") && manifest.contains("SASL_SSL"),
        "redacted, not dropped: {manifest}"
    );
}
