//! TLS and SASL end to end, per family: the managed broker started with `broker up FAMILY
//! --tls` (Kafka: SSL and SASL_SSL listeners with PLAIN and SCRAM; RabbitMQ: amqps:// with PLAIN
//! and EXTERNAL; a throwaway CA either way), the driver file `broker status FAMILY
//! --driver-file` prints, clean runs over each listener and mechanism, a wrong password and an
//! untrusted certificate refused at once with what to fix, and no secret in anything a TLS run
//! writes. Its own test binary: a shared managed broker running without TLS is restarted with
//! it (TLS then stays on for later starts of that home; the plain listeners are unchanged, so
//! the other tests do not notice).

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;

/// The family's managed broker with TLS on: the driver file for its TLS listener (with the
/// SASL user's password), and the password.
fn tls_broker(family: &'static str) -> (String, String) {
    static DRIVERS: Mutex<Vec<(&str, String, String)>> = Mutex::new(Vec::new());
    let mut drivers = DRIVERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, driver, password)) = drivers.iter().find(|(f, _, _)| *f == family) {
        return (driver.clone(), password.clone());
    }
    match family {
        "kafka" => {
            kafka();
        }
        "nats" => {
            nats();
        }
        _ => {
            rabbitmq();
        }
    }
    let up = || {
        brokerbench()
            .args(["broker", "up", family, "--tls"])
            .timeout(Duration::from_secs(180))
            .output()
            .unwrap()
    };
    let mut output = up();
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(said.contains("without TLS"), "{said}");
        let down = brokerbench()
            .args(["broker", "down", family])
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(down.status.success(), "{down:?}");
        output = up();
    }
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{output:?}");
    assert!(
        printed.contains("TLS:  ") && printed.contains("ca.pem"),
        "{printed}"
    );
    let file = brokerbench()
        .args(["broker", "status", family, "--driver-file"])
        .output()
        .unwrap();
    assert!(file.status.success(), "{file:?}");
    let text = String::from_utf8(file.stdout).unwrap();
    let password = std::fs::read_to_string(
        brokerbench_brokers::home()
            .join(family)
            .join("tls")
            .join("password"),
    )
    .unwrap()
    .trim()
    .to_string();
    assert!(password.len() >= 16 && text.contains(&password), "{text}");
    drivers.push((family, text.clone(), password.clone()));
    (text, password)
}

#[test]
fn kafka_runs_over_sasl_ssl_with_each_mechanism_and_over_ssl_are_clean() {
    let _turn = serial();
    let (driver, _) = &tls_broker("kafka");
    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] {
        let run = run_driver_text(
            driver,
            &[&format!("common_config.sasl.mechanisms={mechanism}")],
        );
        let s = assert_lossless(&run);
        assert!(
            s["total"]["sent"].as_u64().unwrap() >= 2000,
            "{mechanism}: {s:#}"
        );
    }
    // The SSL listener (no SASL), with the client certificate, as the driver file's comment
    // gives it.
    let ssl = driver
        .lines()
        .filter_map(|line| line.strip_prefix("#   "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        ssl.contains("security.protocol: SSL") && ssl.contains("ssl.certificate.location"),
        "{driver}"
    );
    assert_lossless(&run_driver_text(
        &format!("driver: kafka\n{ssl}\nproducer_config: {{acks: '1'}}\n"),
        &[],
    ));
    // A client certificate from another CA is refused by that listener.
    let other = tempfile::tempdir().unwrap();
    let foreign = brokerbench_brokers::tls::TlsFiles::of(other.path());
    foreign.generate_once().unwrap();
    let home_tls = brokerbench_brokers::home().join("kafka").join("tls");
    let impostor = ssl
        .replace(
            &home_tls.join("client.pem").display().to_string(),
            &foreign.client_certificate().display().to_string(),
        )
        .replace(
            &home_tls.join("client-key.pem").display().to_string(),
            &foreign.client_key().display().to_string(),
        );
    assert_ne!(impostor, ssl);
    let run = run_driver_text(
        &format!("driver: kafka\n{impostor}\nproducer_config: {{acks: '1'}}\n"),
        &[],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("TLS handshake failed"),
        "{}",
        run.stderr
    );
}

#[test]
fn rabbitmq_runs_over_amqps_with_plain_and_with_external_are_clean() {
    let _turn = serial();
    let (driver, _) = &tls_broker("rabbitmq");
    assert!(driver.contains("uri: amqps://brokerbench:"), "{driver}");
    assert_lossless(&run_driver_text(driver, &[]));
    // The client certificate instead of the password: SASL EXTERNAL, as its common name.
    let external = driver
        .lines()
        .find_map(|line| line.strip_prefix("# uri: "))
        .unwrap_or_else(|| panic!("no EXTERNAL uri in the driver file:\n{driver}"));
    assert!(external.contains("auth_mechanism=external"), "{external}");
    assert_lossless(&run_driver_text(
        &format!("driver: rabbitmq\nuri: '{external}'\n"),
        &[],
    ));
}

#[test]
fn nats_runs_over_tls_are_clean_and_plain_clients_go_on_beside_them() {
    let _turn = serial();
    let (driver, _) = &tls_broker("nats");
    assert!(driver.contains("servers: tls://brokerbench:"), "{driver}");
    assert_lossless(&run_driver_text(driver, &[]));
    // The same port still takes plain clients that name no user.
    let plain = format!("driver: nats\nservers: nats://{}\n", nats());
    assert_lossless(&run_driver_text(&plain, &[]));
}

#[test]
fn a_wrong_password_is_refused_at_once_naming_the_user_not_the_password() {
    let _turn = serial();
    for (family, names) in [
        ("kafka", ["SCRAM-SHA-512", "sasl.password"]),
        ("rabbitmq", ["user 'brokerbench'", "password in the uri"]),
        ("nats", ["user 'brokerbench'", "password in servers"]),
    ] {
        let (driver, password) = tls_broker(family);
        let wrong = driver.replace(password.as_str(), "Zq7wrongpassword");
        let started = Instant::now();
        let run = run_driver_text(&wrong, &[]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{family}: took {:?}",
            started.elapsed()
        );
        assert_eq!(run.code, 3, "{family}: {}", run.stderr);
        assert!(
            run.stderr.contains("refused the credentials")
                && run.stderr.contains("brokerbench")
                && names.iter().all(|name| run.stderr.contains(name)),
            "{family}: {}",
            run.stderr
        );
        for secret in ["Zq7", password.as_str()] {
            assert!(!run.stderr.contains(secret) && !run.stdout.contains(secret));
        }
    }
}

#[test]
fn an_untrusted_certificate_is_refused_at_once_naming_the_setting() {
    let _turn = serial();
    // A CA of another home: valid, but not the one that signed the brokers' certificates.
    let other = tempfile::tempdir().unwrap();
    let foreign = brokerbench_brokers::tls::TlsFiles::of(other.path());
    foreign.generate_once().unwrap();
    for (family, setting, reason) in [
        ("kafka", "ssl.ca.location", "certificate verify failed"),
        ("rabbitmq", "cacertfile", "UnknownIssuer"),
        ("nats", "ca_file", "UnknownIssuer"),
    ] {
        let (driver, _) = tls_broker(family);
        let ca = brokerbench_brokers::home()
            .join(family)
            .join("tls")
            .join("ca.pem")
            .display()
            .to_string();
        assert!(driver.contains(&ca), "{driver}");
        let untrusted = driver.replace(&ca, &foreign.ca().display().to_string());
        let started = Instant::now();
        let run = run_driver_text(&untrusted, &[]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{family}: took {:?}",
            started.elapsed()
        );
        assert_eq!(run.code, 3, "{family}: {}", run.stderr);
        assert!(
            run.stderr.contains("TLS handshake")
                && run.stderr.contains(reason)
                && run.stderr.contains(setting),
            "{family}: {}",
            run.stderr
        );
    }
}

#[test]
fn no_secret_reaches_any_output_of_a_tls_run() {
    let _turn = serial();
    for (family, process, redacted) in [
        ("kafka", "kafka.Kafka", "\"sasl.password\": \"***\""),
        ("rabbitmq", "beam.smp", "amqps://brokerbench:***@"),
        ("nats", "nats-server", "tls://brokerbench:***@"),
    ] {
        let (driver, password) = tls_broker(family);
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "driver.yaml", &driver);
        let folder = dir.path().join("run");
        let omb = dir.path().join("omb-result.json");
        let output = brokerbench()
            .arg("run")
            .args(with_sets(&short("2000", 2), &[]))
            .args(["--driver", file.to_str().unwrap()])
            .args(["--broker-process", process])
            .arg("--out")
            .arg(&folder)
            .arg("--omb-result")
            .arg(&omb)
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{family}: {stdout}\n{stderr}");
        assert!(!stdout.contains(password.as_str()) && !stderr.contains(password.as_str()));
        let mut files = files_under(&folder);
        files.push(omb);
        assert!(
            files.iter().any(|f| f.ends_with("report.html"))
                && files.iter().any(|f| f.ends_with("manifest.json"))
                && files.iter().any(|f| f.ends_with("omb-result.json")),
            "{family}: {files:?}"
        );
        // The private keys of the home's TLS material, by the first line of their body.
        let tls_dir = brokerbench_brokers::home().join(family).join("tls");
        let keys: Vec<String> = ["ca-key.pem", "server-key.pem", "client-key.pem"]
            .iter()
            .map(|name| {
                let pem = std::fs::read_to_string(tls_dir.join(name)).unwrap();
                pem.lines().nth(1).unwrap().to_string()
            })
            .collect();
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(password.as_str()),
                "{} holds the password",
                path.display()
            );
            assert!(
                !text.contains("PRIVATE KEY") && keys.iter().all(|key| !text.contains(key)),
                "{} holds a private key",
                path.display()
            );
        }
        let manifest = std::fs::read_to_string(folder.join("manifest.json")).unwrap();
        assert!(
            manifest.contains(redacted),
            "{family}: redacted, not dropped: {manifest}"
        );
    }
}
