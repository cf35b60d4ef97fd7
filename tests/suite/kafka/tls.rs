//! Kafka's TLS and SASL listeners (`broker up kafka --tls`): each SASL mechanism, and SSL
//! with a client certificate, which one of another CA does not pass.

use super::*;

#[test]
fn kafka_runs_over_sasl_ssl_with_each_mechanism_and_over_ssl_are_clean() {
    let _turn = serial();
    kafka();
    let (driver, _) = &checks::tls_driver("kafka", &Secret::Password);
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
