//! Apache Pulsar against the real managed standalone (the pinned release from Maven Central,
//! fetched on first use): the conformance suite, and what is Pulsar's own. The broker's own
//! counts come from its admin API.

use std::time::Duration;

// The admin API's port is the broker's client port + this, as the managed broker says.
use brokerbench_pulsar::managed::WEB_OFFSET;

use crate::common::*;
use crate::conformance::*;

/// The bundled Pulsar driver file.
const PULSAR_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers/pulsar.yaml");

pub static SUBJECT: Subject = Subject {
    family: "pulsar",
    // Its metrics endpoint counts the same messages in; the topic's stats say what it took.
    counted: Counted {
        seconds: 2,
        sets: &["delete_topics=false"],
        prefix: "topic_prefix={prefix}",
        exact: true,
        publish_slack_us: None,
        stored: the_topic_took_every_message,
        leftovers: Some(topics),
    },
    topology: Topology {
        sets: &[
            "partitions_per_topic=3",
            "subscriptions_per_topic=2",
            "consumers_per_topic=2",
            "subscription_type=Shared",
        ],
        stored: None,
    },
    omb: omb_driver_files,
    unreachable: &["service_url=pulsar://127.0.0.1:1", "auth_token=hunter2"],
    bad_fields: &[
        ("subscription_type=Shard", "Shared"),
        ("batchng=true", "did you mean `batching`?"),
        ("namespace=public", "field `namespace`"),
        ("receiver_queue_size=0", "field `receiver_queue_size`"),
        ("service_url=http://h:1", "pulsar://host:6650"),
        ("topic_type=durable", "non-persistent"),
        (
            "backlog_quota_policy=producer_exception",
            "field `backlog_quota_policy`",
        ),
        ("subscription_type=Key_Shared", "batching: false"),
        ("batching_max_bytes=6MiB", "maxMessageSize"),
    ],
    // Persistent topics and confirmed sends: nothing confirmed before the kill is lost (see
    // MayLose::AsTheKillLanded for what was, once, as it landed). After a SIGKILL the
    // standalone's bookie registration sometimes loops and the start is done again (see
    // ManagedPulsar::wait_settled): with a core kept busy the two starts took 29 s.
    kill: Kill::with(&[], MayLose::AsTheKillLanded),
    tls: Some(Tls {
        secret: Secret::Line("auth_token: "),
        shown: "pulsar+ssl://127.0.0.1:",
        wrong_secret: &[
            "refused the credentials",
            "AuthenticationError",
            "auth_token",
        ],
        untrusted: &["UnknownIssuer", "ca_file"],
    }),
    // Unbatched messages and a receiver queue of 1 have the broker send one message at a
    // time, the next once its permit comes back (a round trip per message), while the
    // producer, at the maximum rate, keeps up to 1000 sends in flight (measured: 61,835 msg/s
    // acknowledged, 1,595 msg/s received, 188,205 of 199,846 left after the 1 s drain).
    unconsumed: Some(Unconsumed {
        rate: "max",
        sets: &[
            "message_size=100B",
            "receiver_queue_size=1",
            "batching=false",
        ],
        evidence: "msgBacklog",
        exits_clean: true,
        check: None,
    }),
    // The consumers stop reading until 15,000 messages of 100 B wait for them (3 s at 5,000
    // msg/s), while the run's namespace lets a subscription keep at most 100 KB (set by the
    // run through the admin API) and the managed broker enforces its quotas every second
    // (measured with 2 MB: 16,305 of 20,111 evicted).
    dropped: Some(Dropped {
        rate: "5000",
        seconds: 4,
        limit: &[
            "backlog_quota_size=100KB",
            "backlog_quota_policy=consumer_backlog_eviction",
        ],
        backlog: "1500KB",
        note: None,
    }),
};

conformance!(super::SUBJECT, tls, unconsumed, dropped);

/// Starts the managed Pulsar once for the suite, with TLS and authentication on (`broker up
/// pulsar --tls`; clients that give no credentials go on as before on the plain port, so
/// every other test runs against it unchanged); its client port.
fn pulsar() -> u16 {
    family_port("pulsar")
}

/// The admin API's port.
fn web() -> u16 {
    pulsar() + WEB_OFFSET
}

/// GET `path` of the managed broker's admin API, as JSON.
fn admin(path: &str) -> serde_json::Value {
    let body = brokerbench_brokers::http::get(
        web(),
        &format!("/admin/v2/{path}"),
        None,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|| panic!("GET /admin/v2/{path} answered no 200"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The topics of `public/default` whose names contain `part`.
fn topics(part: &str) -> Vec<String> {
    admin("persistent/public/default")
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .filter(|t| t.contains(part))
        .map(str::to_string)
        .collect()
}

/// The kept run's topic took every acknowledged message, and its subscription delivered them
/// all; the manifest names the pinned release.
fn the_topic_took_every_message(prefix: &str, run: &Run, s: &serde_json::Value) {
    assert_eq!(run.broker_version(), brokerbench_pulsar::managed::VERSION);
    let acknowledged = s["total"]["acknowledged"].as_u64().unwrap();
    let kept = topics(prefix);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let path = kept[0].replacen("://", "/", 1);
    let stats = admin(&format!("{path}/stats"));
    assert_eq!(
        stats["msgInCounter"].as_u64(),
        Some(acknowledged),
        "{stats:#}"
    );
    let sub = &stats["subscriptions"]["s0"];
    assert_eq!(
        sub["msgOutCounter"].as_u64(),
        Some(acknowledged),
        "{stats:#}"
    );
    assert_eq!(
        sub["msgBacklog"], 0,
        "every message acknowledged: {stats:#}"
    );
    assert_eq!(sub["type"], "Failover", "{stats:#}");
}

/// OMB's driver-pulsar/pulsar.yaml, with the managed broker's ports (6650 and 8080 unless
/// moved): ensemble 3 of a standalone's one bookie cannot be had, and is refused with the
/// fixes; with the quorum one bookie gives, it runs, and its namespace goes with it.
fn omb_driver_files(port: u16) -> Vec<OmbFile> {
    let web = port + WEB_OFFSET;
    let text = format!(
        "name : Pulsar\ndriverClass: io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver\n\n# Pulsar client specific configurations\n\nclient:\n    serviceUrl : pulsar://localhost:{port}\n    httpUrl : http://localhost:{web}\n\n    ioThreads : 8\n    connectionsPerBroker : 8\n\n    namespacePrefix : benchmark/local/ns\n\n    topicType: persistent\n\n    persistence:\n      ensembleSize : 3\n      writeQuorum : 3\n      ackQuorum : 2\n\n# Producer configuration\nproducer:\n    batchingEnabled : true\n    batchingMaxPublishDelayMs : 1\n    blockIfQueueFull : true\n"
    );
    let quorum = [
        "persistence.ensemble_size=1",
        "persistence.write_quorum=1",
        "persistence.ack_quorum=1",
    ];
    vec![
        OmbFile {
            name: "pulsar.yaml",
            text: text.clone(),
            sets: Vec::new(),
            note: "",
            expect: Expect::Refused(&[
                "persistence.ensemble_size is 3",
                "--set persistence.ensemble_size=1",
                "brokerbench broker up pulsar --nodes 3",
            ]),
            check: None,
        },
        OmbFile {
            name: "pulsar.yaml",
            text,
            sets: quorum.iter().map(|s| s.to_string()).collect(),
            note: "OpenMessaging Benchmark Pulsar driver file",
            expect: Expect::Lossless,
            check: Some(the_runs_namespace_is_gone),
        },
    ]
}

/// The run's own namespace is gone with its topics.
fn the_runs_namespace_is_gone(_run: &Run, _s: &serde_json::Value) {
    let left = admin("namespaces/benchmark");
    assert_eq!(left, serde_json::json!([]), "{left}");
}

/// The driver file `broker status pulsar --driver-file` prints for the TLS listener, and the
/// token it holds.
fn tls_driver() -> (String, String) {
    pulsar();
    let (text, token) = checks::tls_driver("pulsar", &Secret::Line("auth_token: "));
    assert!(
        text.contains("service_url: pulsar+ssl://127.0.0.1:"),
        "{text}"
    );
    (text, token)
}

/// Shared subscriptions acknowledge each message: a cumulative acknowledgement is refused
/// before anything starts, naming the field.
#[test]
fn a_shared_subscription_with_cumulative_acknowledgements_exits_2_naming_ack() {
    let run = run(&[
        "--driver",
        PULSAR_DRIVER,
        "--set",
        "subscription_type=Shared",
        "--set",
        "ack=cumulative",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("field `ack`"), "{}", run.stderr);
}

#[test]
fn failover_cumulative_and_unbatched_runs_are_lossless() {
    let _turn = serial();
    // Two members of a Failover subscription on two partitions: one active consumer per
    // partition; acknowledgements cumulative; every message its own entry.
    let run = family_run(
        "pulsar",
        PULSAR_DRIVER,
        &short_with(
            "2000",
            2,
            &[
                "partitions_per_topic=2",
                "consumers_per_topic=2",
                "ack=cumulative",
                "batching=false",
            ],
        ),
    );
    assert_lossless(&run);
    // A non-persistent topic: held in the broker's memory, confirmed on arrival.
    let run = family_run(
        "pulsar",
        PULSAR_DRIVER,
        &short_with("2000", 2, &["topic_type=non-persistent"]),
    );
    assert_lossless(&run);
}

/// How many connections the broker's log says logged in with `method`.
fn logins(method: &str) -> usize {
    let log = brokerbench_brokers::home().join("pulsar/pulsar.log");
    let text = std::fs::read_to_string(log).unwrap();
    let line = format!("connected with role=brokerbench using authMethod={method}");
    text.matches(&line).count()
}

#[test]
fn the_token_and_the_client_certificate_each_log_in_and_omb_tls_keys_work() {
    let _turn = serial();
    let (driver, _) = tls_driver();
    let before = logins("token");
    assert_lossless(&run_driver_text(&driver, &[]));
    assert!(logins("token") > before, "the broker saw no token login");
    // Pulsar's TLS authentication: the client certificate's common name is the role.
    let commented = driver
        .lines()
        .find_map(|line| line.strip_prefix("#   tls: "))
        .unwrap_or_else(|| panic!("no client-certificate line in {driver}"));
    let by_certificate = driver
        .lines()
        .filter(|line| !line.starts_with("auth_token:") && !line.starts_with("tls:"))
        .chain([format!("tls: {commented}").as_str()])
        .collect::<Vec<_>>()
        .join("\n");
    let before = logins("tls");
    assert_lossless(&run_driver_text(&by_certificate, &[]));
    assert!(
        logins("tls") > before,
        "the broker saw no certificate login"
    );
    // The same through an OpenMessaging Benchmark driver file's TLS keys.
    let service = driver
        .lines()
        .find_map(|line| line.strip_prefix("service_url: "))
        .unwrap();
    let tls = brokerbench_brokers::home().join("pulsar/tls");
    let omb = format!(
        "name: Pulsar\ndriverClass: io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver\nclient:\n  serviceUrl: {service}\n  httpUrl: http://127.0.0.1:{}\n  topicType: persistent\n  persistence: {{ensembleSize: 1, writeQuorum: 1, ackQuorum: 1}}\n  tlsAllowInsecureConnection: false\n  tlsEnableHostnameVerification: false\n  tlsTrustCertsFilePath: {}\n  authentication:\n    plugin: org.apache.pulsar.client.impl.auth.AuthenticationTls\n    data: tlsCertFile:{},tlsKeyFile:{}\n",
        web(),
        tls.join("ca.pem").display(),
        tls.join("client.pem").display(),
        tls.join("client-key.pem").display(),
    );
    let before = logins("tls");
    assert_lossless(&run_driver_text(&omb, &[]));
    assert!(
        logins("tls") > before,
        "the OMB file's certificate logged in"
    );
}

#[test]
fn a_client_certificate_of_another_ca_is_refused_naming_cert_file() {
    let _turn = serial();
    let (driver, token) = tls_driver();
    let home_tls = brokerbench_brokers::home().join("pulsar/tls");
    let other = tempfile::tempdir().unwrap();
    let foreign = brokerbench_brokers::tls::TlsFiles::of(other.path());
    foreign.generate_once().unwrap();
    let ca = home_tls.join("ca.pem").display().to_string();
    let with_client = |certificate: &std::path::Path, key: &std::path::Path| {
        driver.replace(
            &format!("tls: {{ca_file: '{ca}'}}"),
            &format!(
                "tls: {{ca_file: '{ca}', cert_file: '{}', key_file: '{}'}}",
                certificate.display(),
                key.display()
            ),
        )
    };
    let cases = [(
        with_client(&foreign.client_certificate(), &foreign.client_key())
            .replace(&format!("auth_token: {token}\n"), ""),
        vec!["client certificate", "cert_file"],
    )];
    for (text, names) in cases {
        assert_ne!(text, driver);
        assert_refused_at_once(&text, &names, &[&token, "Zq7-"]);
    }
}
