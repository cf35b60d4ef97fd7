use super::storage::*;
use super::*;
use brokerbench_brokers::test_support::{self, DownOnDrop};

impl test_support::Managed for Kafka {
    fn pid_file(&self) -> PathBuf {
        Kafka::pid_file(self)
    }
}
use std::ffi::OsStr;
use std::time::Instant;

#[test]
fn properties_describe_a_single_node_kraft_cluster_on_loopback() {
    let text = server_properties(
        19092,
        Path::new("/h/kafka/data"),
        None,
        &Quorum::single(19092),
    );
    let expected = [
        ("process.roles", "broker,controller"),
        ("node.id", "1"),
        ("controller.quorum.voters", "1@127.0.0.1:19093"),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        ),
        ("advertised.listeners", "PLAINTEXT://127.0.0.1:19092"),
        ("controller.listener.names", "CONTROLLER"),
        ("log.dirs", "/h/kafka/data"),
        ("offsets.topic.replication.factor", "1"),
        ("transaction.state.log.replication.factor", "1"),
        ("transaction.state.log.min.isr", "1"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("auto.create.topics.enable", "false"),
        ("num.partitions", "1"),
        ("delete.topic.enable", "true"),
    ];
    test_support::assert_settings(&text, "=", &expected);
    assert_eq!(listener_port(&text), Some(19092));
}

#[test]
fn with_tls_the_properties_add_ssl_and_sasl_ssl_listeners_and_keep_plaintext() {
    let tls = TlsListeners {
        keystore: PathBuf::from("/h/kafka/tls/kafka-keystore.pem"),
        ca: PathBuf::from("/h/kafka/tls/ca.pem"),
        password: "Pw0rd".into(),
    };
    let text = server_properties(
        19092,
        Path::new("/h/kafka/data"),
        Some(&tls),
        &Quorum::single(19092),
    );
    let expected = [
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SSL://127.0.0.1:19094,SASL_SSL://127.0.0.1:19095",
            ),
            (
                "advertised.listeners",
                "PLAINTEXT://127.0.0.1:19092,SSL://127.0.0.1:19094,SASL_SSL://127.0.0.1:19095",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
            ),
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/h/kafka/tls/kafka-keystore.pem"),
            ("ssl.truststore.location", "/h/kafka/tls/ca.pem"),
            ("listener.name.ssl.ssl.client.auth", "required"),
            ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
            (
                "listener.name.sasl_ssl.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_brokerbench=\"Pw0rd\";",
            ),
        ];
    test_support::assert_settings(&text, "=", &expected);
    assert_eq!(listener_port(&text), Some(19092));
    assert_eq!(named_listener_port(&text, "SSL"), Some(19094));
    assert_eq!(named_listener_port(&text, "SASL_SSL"), Some(19095));
    assert_eq!(text.matches("listeners=").count(), 2, "{text}");
    let plain = server_properties(
        19092,
        Path::new("/h/kafka/data"),
        None,
        &Quorum::single(19092),
    );
    assert_eq!(named_listener_port(&plain, "SASL_SSL"), None);
    assert!(!plain.contains("ssl."), "{plain}");
}

#[test]
fn a_node_of_three_votes_with_the_others_and_replicates_internal_topics_three_times() {
    let quorum = Quorum {
        node: 2,
        voters: vec![(1, 9093), (2, 40001), (3, 40101)],
    };
    let text = server_properties(40000, Path::new("/h/kafka/node-2/data"), None, &quorum);
    for (key, value) in [
        ("node.id", "2"),
        (
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.1:40001,3@127.0.0.1:40101",
        ),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:40000,CONTROLLER://127.0.0.1:40001",
        ),
        ("offsets.topic.replication.factor", "3"),
        ("transaction.state.log.min.isr", "2"),
    ] {
        assert!(
            text.contains(&format!("\n{key}={value}\n")),
            "{key}: {text}"
        );
    }
}

#[test]
fn server_settings_come_last_so_they_win() {
    let settings = vec![("num.partitions".to_string(), "3".to_string())];
    let text = server_properties(19092, Path::new("/d"), None, &Quorum::single(19092))
        + &settings_lines(&settings);
    let last = text
        .lines()
        .rev()
        .find(|l| l.starts_with("num.partitions="));
    assert_eq!(last, Some("num.partitions=3"), "{text}");
    assert_eq!(settings_lines(&Vec::new()), "");
}

#[test]
fn nodes_beyond_the_first_keep_their_files_apart_and_share_the_jars() {
    let kafka = Kafka::new(Path::new("/h"));
    let third = Kafka {
        node: 3,
        ..kafka.clone()
    };
    assert_eq!(
        third.properties_file(),
        PathBuf::from("/h/kafka/node-3/server.properties")
    );
    assert_eq!(third.data_dir(), PathBuf::from("/h/kafka/node-3/data"));
    assert_eq!(
        third.pid_file(),
        PathBuf::from("/h/kafka/node-3/broker.pid")
    );
    assert_eq!(third.lib_dir(), kafka.lib_dir());
    assert_eq!(kafka.data_dir(), PathBuf::from("/h/kafka/data"));
}

#[test]
fn listener_port_reads_the_plaintext_listener() {
    let text = "listeners=CONTROLLER://127.0.0.1:9,PLAINTEXT://127.0.0.1:29092\n";
    assert_eq!(listener_port(text), Some(29092));
    assert_eq!(listener_port("node.id=1\n"), None);
}

#[test]
fn maven_colour_codes_are_stripped() {
    assert_eq!(
        strip_ansi("\u{1b}[0m\u{1b}[1;31m[ERROR]\u{1b}[m boom"),
        "[ERROR] boom"
    );
}

#[test]
fn port_variable_leaves_room_for_the_controller() {
    test_support::assert_port_variable(9092, 1..=PORT_RULE.max, 65534);
}

#[test]
fn invalid_ports_are_reported_by_up() {
    let home = tempfile::tempdir().unwrap();
    let kafka = Kafka::new(home.path()).with_port(0);
    assert!(matches!(
        kafka.up(),
        Err(BrokerError::PortOutOfRange { port: 0, .. })
    ));
}

#[test]
fn a_start_checks_that_the_jars_are_there_after_up_fetched_them() {
    // `up` fetches the jars first (with Maven) when they are not there; the start itself
    // refuses a home without them, saying how to install.
    let home = tempfile::tempdir().unwrap();
    let kafka = Kafka::new(home.path()).with_port(19992);
    assert!(!kafka.is_installed());
    let message = Lifecycle::check(&kafka).unwrap_err().to_string();
    assert!(
        message.contains("brokerbench broker install kafka"),
        "{message}"
    );
    assert_eq!(kafka.status().unwrap(), None);
}

#[test]
fn an_outdated_exporter_configuration_is_rewritten_and_a_missing_one_left_missing() {
    let home = tempfile::tempdir().unwrap();
    let kafka = Kafka::new(home.path());
    kafka.refresh_exporter_config().unwrap();
    assert!(
        !kafka.jmx_exporter_config().exists(),
        "a broker started without the agent has none"
    );
    fs::create_dir_all(kafka.dir()).unwrap();
    fs::write(kafka.jmx_exporter_config(), "rules:\n  - pattern: \".*\"\n").unwrap();
    kafka.refresh_exporter_config().unwrap();
    assert_eq!(
        fs::read_to_string(kafka.jmx_exporter_config()).unwrap(),
        JMX_EXPORTER_CONFIG
    );
}

#[test]
fn the_metrics_agent_is_loaded_on_loopback_when_installed() {
    let home = tempfile::tempdir().unwrap();
    let kafka = Kafka::new(home.path()).with_port(19_500);
    assert_eq!(kafka.agent_argument(), None, "not installed: no agent");
    fs::create_dir_all(kafka.agent_jar().parent().unwrap()).unwrap();
    fs::write(kafka.agent_jar(), "").unwrap();
    let argument = kafka.agent_argument().unwrap().into_string().unwrap();
    assert_eq!(
        argument,
        format!(
            "-javaagent:{}=127.0.0.1:19812:{}",
            kafka.agent_jar().display(),
            kafka.jmx_exporter_config().display()
        )
    );
    let command = kafka.broker_command();
    let arguments: Vec<&OsStr> = command.get_args().collect();
    let agent_at = arguments
        .iter()
        .position(|a| *a == OsStr::new(&argument))
        .unwrap();
    let main_at = arguments
        .iter()
        .position(|a| *a == OsStr::new(MAIN_CLASS))
        .unwrap();
    assert!(agent_at < main_at, "JVM options come before the main class");
}

#[test]
fn broker_command_line_is_the_documented_one() {
    let kafka = Kafka::new(Path::new("/h")).with_port(19092);
    let command = kafka.broker_command();
    let arguments: Vec<&OsStr> = command.get_args().collect();
    let expected = [
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        "-Dkafka.logs.dir=/h/kafka/logs",
        "-Dlog4j2.configurationFile=/h/kafka/log4j2.properties",
        "-cp",
        "/h/kafka/4.1.1/lib/*",
        "kafka.Kafka",
        "/h/kafka/server.properties",
    ];
    assert_eq!(arguments, expected.map(OsStr::new));
    // What `down` looks for on the JVM's command line is exactly what we pass.
    let cmdline = test_support::cmdline(arguments);
    assert!(process::cmdline_has_arguments(
        &cmdline,
        &kafka.ownership_arguments()
    ));
    // Another home's broker is not ours.
    let other = Kafka::new(Path::new("/elsewhere")).ownership_arguments();
    assert!(!process::cmdline_has_arguments(&cmdline, &other));
}

#[test]
fn relative_homes_become_absolute() {
    let kafka = Kafka::new(Path::new("relative/home"));
    assert!(kafka.properties_file().is_absolute());
}

#[test]
fn cluster_ids_look_like_kafka_uuids() {
    for _ in 0..100 {
        let id = random_cluster_id().unwrap();
        assert!(is_cluster_id(&id), "{id}");
    }
    // Known vector: the nil UUID and an all-ones UUID.
    assert_eq!(base64_url(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(base64_url(&[0xff; 16]), "_____________________w");
    assert_eq!(base64_url(b"foob"), "Zm9vYg");
}

#[test]
fn cluster_id_is_generated_once_and_kept() {
    let home = tempfile::tempdir().unwrap();
    let kafka = Kafka::new(home.path());
    fs::create_dir_all(kafka.dir()).unwrap();
    let first = kafka.cluster_id().unwrap();
    assert_eq!(kafka.cluster_id().unwrap(), first);
}

#[test]
fn pom_names_the_broker_tools_and_log_binding() {
    for artifact in ["kafka_2.13", "kafka-tools", "log4j-slf4j-impl"] {
        assert!(
            POM.contains(&format!("<artifactId>{artifact}</artifactId>")),
            "{artifact}"
        );
    }
    assert!(POM.contains(&format!("<kafka.version>{VERSION}</kafka.version>")));
}

/// Installs (when needed), starts, checks and stops a real broker on ports the system
/// chooses (client port and controller port after it) in a temporary home. Needs Java 17+
/// and Maven; the jars come from ~/.m2 after the first resolve.
#[test]
fn real_broker_lifecycle() {
    let home = tempfile::tempdir().unwrap();
    let port = test_support::free_port_layout(&[0, 1]);
    let kafka = Kafka::new(home.path()).with_port(port);
    let _down_on_drop = DownOnDrop(&kafka);

    let started = Instant::now();
    kafka.install().expect("install");
    assert!(kafka.is_installed());
    kafka.install().expect("second install is a no-op");
    eprintln!("install: {:?}", started.elapsed());

    assert_eq!(kafka.status().unwrap(), None);
    let status = test_support::assert_starts(&kafka, "up (cold start)");
    assert_eq!(status.name, "kafka");
    assert_eq!(status.address, format!("127.0.0.1:{port}"));
    assert_eq!(status.version, VERSION);
    assert_eq!(status.data_dir, kafka.data_dir());
    assert!(status.data_dir.join("meta.properties").is_file());
    assert_eq!(process::read_pid_file(&kafka.pid_file()), Some(status.pid));
    assert_eq!(kafka.status().unwrap(), Some(status.clone()));

    test_support::assert_still_running(&kafka, &status);

    // Another home cannot take the same port, and says so.
    let other_home = tempfile::tempdir().unwrap();
    let other = Kafka::new(other_home.path()).with_port(port);
    fs::create_dir_all(other.lib_dir()).unwrap();
    for jar in REQUIRED_JARS {
        fs::write(other.lib_dir().join(format!("{jar}-{VERSION}.jar")), "").unwrap();
    }
    fs::create_dir_all(other.agent_jar().parent().unwrap()).unwrap();
    fs::write(other.agent_jar(), "").unwrap();
    let error = other.up().unwrap_err();
    assert!(
        matches!(error, BrokerError::PortInUse { port: taken, .. } if taken == port),
        "{error}"
    );
    assert_eq!(other.down().unwrap(), None);

    let log = fs::read_to_string(&status.log_file).unwrap();
    assert!(
        log.contains("Kafka Server started"),
        "log4j2 output in {log}"
    );

    test_support::assert_stops(&kafka, &status, "shut down completed");

    // A JVM that dies during start fails `up` at once, quoting the log.
    let starves = kafka.clone().with_heap("lots");
    let message = test_support::assert_start_fails(&starves, Duration::from_secs(10));
    assert!(message.contains("Invalid initial heap size"), "{message}");
    assert!(
        message.contains(&status.log_file.display().to_string()),
        "{message}"
    );

    // A second start reuses the formatted data directory.
    let status = test_support::assert_starts(&kafka, "up (formatted data)");
    assert_eq!(kafka.down().unwrap(), Some(status.pid));
}
