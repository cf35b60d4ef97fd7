//! The broker's metrics endpoint over HTTPS with basic authentication: the figures read, the
//! password nowhere.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use super::*;

const PASSWORD: &str = "s3cret-Metrics-pw";

/// A CA and a server certificate for 127.0.0.1 signed by it.
fn throwaway_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl tool (scripts/setup installs it)");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=brokerbench test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// An https endpoint that answers a request carrying `authorization` with the body of
/// `upstream` (read over plain http), and anything else with 401. Serves until the test
/// process ends.
fn https_proxy(certificate: &Path, key: &Path, upstream: String, authorization: String) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificate)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, PrivateKeyDer::from_pem_file(key).unwrap())
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, tcp);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match tls.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let authorized = head.lines().any(|l| {
                l.split_once(':').is_some_and(|(name, value)| {
                    name == "authorization" && value.trim() == authorization.to_ascii_lowercase()
                })
            });
            let response = if authorized {
                let body = brokerbench_metrics::scrape(&upstream, Duration::from_secs(2))
                    .unwrap_or_default();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"metrics\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = tls.write_all(response.as_bytes());
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    port
}

/// Every file under `dir`, as text.
fn all_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&all_text(&path));
        } else {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    text
}

#[test]
fn kafka_metrics_over_https_with_basic_auth_and_no_password_anywhere() {
    let _turn = serial();
    kafka();
    let upstream = brokerbench_kafka::managed::Kafka::new(&brokerbench_brokers::home())
        .metrics_url()
        .expect("the managed Kafka serves metrics");
    let dir = tempfile::tempdir().unwrap();
    let (ca, certificate, key) = throwaway_certificates(dir.path());
    // "scraper:s3cret-Metrics-pw" in base64.
    let basic = "Basic c2NyYXBlcjpzM2NyZXQtTWV0cmljcy1wdw==".to_string();
    let port = https_proxy(&certificate, &key, upstream, basic);
    let url = format!("https://127.0.0.1:{port}/metrics");
    let driver = write(
        dir.path(),
        "kafka-tls-metrics.yaml",
        &format!(
            "driver: kafka\nbroker_metrics:\n  url: {url}\n  ca_file: {}\n  username: scraper\n",
            ca.display()
        ),
    );
    let sets = short("5000", 2);
    let driver_arg = driver.to_str().unwrap();

    // The password from the environment.
    let folder = tempfile::tempdir().unwrap();
    let out = results_folder(folder.path());
    let output = brokerbench()
        .arg("run")
        .args(with_sets(&sets, &["--driver", driver_arg, "--quiet"]))
        .arg("--out")
        .arg(&out)
        .env("BROKERBENCH_METRICS_PASSWORD", PASSWORD)
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let metrics = &summary["broker_metrics"];
    assert_eq!(metrics["url"], url.as_str(), "{stderr}");
    assert_eq!(metrics["scrape_errors"], 0, "{summary:#}");
    let broker = metrics["messages_in"].as_f64().expect("counted over https");
    let acknowledged = summary["total"]["acknowledged"].as_f64().unwrap();
    assert!(
        (broker - acknowledged).abs() / acknowledged < 0.01,
        "broker {broker}, brokerbench {acknowledged}"
    );
    let everything = format!(
        "{}{stderr}{}",
        String::from_utf8_lossy(&output.stdout),
        all_text(&out)
    );
    assert!(!everything.contains(PASSWORD), "the password leaked");

    // The password in the URL given on the command line: same endpoint, nothing leaks.
    let with_password = url.replace("https://", &format!("https://scraper:{PASSWORD}@"));
    let given = run(&with_sets(
        &sets,
        &["--driver", driver_arg, "--broker-metrics", &with_password],
    ));
    let s = assert_lossless(&given);
    assert!(
        s["broker_metrics"]["messages_in"].as_f64().is_some(),
        "{}",
        given.stderr
    );
    let everything = format!(
        "{}{}{}",
        given.stdout,
        given.stderr,
        all_text(&given.folder)
    );
    assert!(!everything.contains(PASSWORD), "the password leaked");

    // The password as a driver-file field set on the command line (`--set=k=v` as one
    // argument): the manifest shows `***`, nothing else shows it.
    let set_password = format!("--set=broker_metrics.password={PASSWORD}");
    let in_file = run(&with_sets(&sets, &["--driver", driver_arg, &set_password]));
    let s = assert_lossless(&in_file);
    assert!(
        s["broker_metrics"]["messages_in"].as_f64().is_some(),
        "{}",
        in_file.stderr
    );
    assert_eq!(
        in_file.manifest()["driver"]["broker_metrics"]["password"],
        "***"
    );
    let everything = format!(
        "{}{}{}",
        in_file.stdout,
        in_file.stderr,
        all_text(&in_file.folder)
    );
    assert!(!everything.contains(PASSWORD), "the password leaked");

    // A wrong password: the run goes on without broker metrics and says why, naming the fix.
    let wrong = url.replace("https://", "https://scraper:not-it@");
    let refused = run(&with_sets(
        &sets,
        &["--driver", driver_arg, "--broker-metrics", &wrong],
    ));
    assert_eq!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("401 Unauthorized")
            && refused.stderr.contains("broker_metrics.username"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("not-it"), "{}", refused.stderr);

    // The system's CAs do not know the throwaway CA: the note says how to trust it.
    let untrusted = write(
        dir.path(),
        "untrusted.yaml",
        &format!("driver: kafka\nbroker_metrics:\n  url: {url}\n  username: scraper\n"),
    );
    let untrusted = run(&with_sets(
        &sets,
        &["--driver", untrusted.to_str().unwrap()],
    ));
    assert_eq!(untrusted.code, 0, "{}", untrusted.stderr);
    assert!(
        untrusted.stderr.contains("not trusted") && untrusted.stderr.contains("ca_file"),
        "{}",
        untrusted.stderr
    );
}
