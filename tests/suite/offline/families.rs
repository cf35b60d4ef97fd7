//! Driver files and `--set` routing across the registered families, and what every family
//! declares.
use brokerbench::families::REGISTRY;
use brokerbench_amqp::config::{ExchangeKind, QueueKind, RabbitMqDriverConfig};
use brokerbench_kafka::KafkaDriverConfig;
use brokerbench_model::spec::validate_file;
use brokerbench_model::{Rate, SpecError, Specs};
use std::io::Write;
use std::path::Path;
use tempfile::NamedTempFile;

fn load_specs(
    workload: Option<&Path>,
    driver: Option<&Path>,
    overrides: &[String],
) -> Result<Specs, SpecError> {
    brokerbench_model::load_specs(&REGISTRY.schemas(), workload, driver, overrides)
}

fn kafka(specs: &Specs) -> KafkaDriverConfig {
    assert_eq!(specs.driver.name(), "kafka");
    specs.driver.parse().unwrap()
}

/// A driver or workload file with this text, removed when dropped.
fn file(text: &str) -> NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn builtin_defaults_load() {
    let specs = load_specs(None, None, &[]).unwrap();
    assert_eq!(specs.workload.name, "quickstart");
    let k = kafka(&specs);
    assert_eq!(
        k.bootstrap_servers, None,
        "the default driver uses the managed broker"
    );
    assert_eq!(k.producer_config.get("acks").map(String::as_str), Some("1"));
}

#[test]
fn overrides_reach_both_files_and_dotted_config_keys() {
    let sets = [
        "rate=20000".to_string(),
        "producer_config.acks=all".to_string(),
        "producer_config.batch.size=65536".to_string(),
        "payload.kind=sensor".to_string(),
        "bootstrap_servers=127.0.0.1:9999".to_string(),
    ];
    let specs = load_specs(None, None, &sets).unwrap();
    assert_eq!(specs.workload.rate, Rate::PerSecond(20000.0));
    assert_eq!(specs.workload.payload, brokerbench_model::Payload::Sensor);
    let k = kafka(&specs);
    assert_eq!(k.producer_config["acks"], "all");
    assert_eq!(k.producer_config["batch.size"], "65536");
    assert_eq!(k.bootstrap_servers.as_deref(), Some("127.0.0.1:9999"));
}

#[test]
fn bad_driver_files() {
    let f = file("driver: kafak\n");
    let err = load_specs(None, Some(f.path()), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `kafka`?"), "{err}");
    let f = file("driver: kafka\nproducer_confg: {}\n");
    let err = load_specs(None, Some(f.path()), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `producer_config`?"), "{err}");
    let f = file("bootstrap_servers: x:1\n");
    let err = load_specs(None, Some(f.path()), &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("add `driver: NAME`, one of: `driver: kafka`"),
        "{err}"
    );
}

#[test]
fn validate_detects_the_kind_of_file() {
    let f = file("driver: kafka\n");
    assert_eq!(
        validate_file(&REGISTRY.schemas(), f.path()).unwrap(),
        "driver"
    );
    let f = file("rate: 10\n");
    assert_eq!(
        validate_file(&REGISTRY.schemas(), f.path()).unwrap(),
        "workload"
    );
}

#[test]
fn a_nats_streaming_driver_file_is_refused_with_what_to_run_instead() {
    // OMB's driver-nats-streaming file, in its format.
    let f = file("name: Nats Streaming\ndriverClass: io.openmessaging.benchmark.driver.natsStreaming.NatsStreamingBenchmarkDriver\nnatsHostUrl: nats://localhost:4222\nclusterId: mycluster\n");
    let err = validate_file(&REGISTRY.schemas(), f.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("field `driverClass`")
            && err.contains("NATS Streaming (STAN)")
            && err.contains("driver-nats/nats.yaml"),
        "{err}"
    );
    let err = load_specs(None, Some(f.path()), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--set driver=nats"), "{err}");
    // Any other unknown class still lists the classes brokerbench reads.
    let f =
        file("driverClass: io.openmessaging.benchmark.driver.rocketmq.RocketMQBenchmarkDriver\n");
    let err = validate_file(&REGISTRY.schemas(), f.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("it reads") && err.contains("NatsBenchmarkDriver"),
        "{err}"
    );
}
fn rabbit(specs: &Specs) -> RabbitMqDriverConfig {
    assert_eq!(specs.driver.name(), "rabbitmq");
    specs.driver.parse().unwrap()
}

#[test]
fn the_builtin_rabbitmq_driver_is_chosen_by_set_driver() {
    let specs = load_specs(None, None, &["driver=rabbitmq".into()]).unwrap();
    assert_eq!(specs.driver_source, "built-in rabbitmq driver");
    let r = rabbit(&specs);
    assert_eq!(
        r,
        RabbitMqDriverConfig::default(),
        "the file states the defaults"
    );
    assert_eq!(specs.driver.name(), "rabbitmq");
}

#[test]
fn overrides_route_by_the_driver_in_use() {
    let sets: Vec<String> = [
        "queue.type=quorum",
        "exchange.type=fanout",
        "queues_per_topic=3",
        "confirms.enabled=false",
        "rate=1000",
        "uri=amqp://bench:hunter2@127.0.0.1:5790/%2f",
        "driver=rabbitmq",
    ]
    .map(String::from)
    .to_vec();
    let specs = load_specs(None, None, &sets).unwrap();
    let r = rabbit(&specs);
    assert_eq!(r.queue.kind, QueueKind::Quorum);
    assert_eq!(r.exchange.kind, ExchangeKind::Fanout);
    assert_eq!(r.queues_per_topic, 3);
    assert!(!r.confirms.enabled);
    assert_eq!(r.uri.as_ref().unwrap().port, 5790);
    assert_eq!(specs.workload.rate, Rate::PerSecond(1000.0));
}

#[test]
fn a_field_of_another_driver_says_which_driver_it_belongs_to() {
    let err = load_specs(
        None,
        None,
        &["driver=rabbitmq".into(), "bootstrap_servers=x:1".into()],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("field of the kafka driver") && err.contains("driver in use is rabbitmq"),
        "{err}"
    );
    let err = load_specs(None, None, &["prefetch=10".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("field of the rabbitmq driver"), "{err}");
    assert!(err.contains("--set driver=rabbitmq"), "{err}");
    let err = load_specs(None, None, &["driver=rabbitmq".into(), "prefech=1".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `prefetch`?"), "{err}");
}

#[test]
fn a_rabbitmq_file_loads_and_validates() {
    let dir = std::env::temp_dir().join(format!("bb-rmq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rabbit.yaml");
    std::fs::write(
        &path,
        "driver: rabbitmq\nuri: amqp://u:topsecret@h:5672/%2f\nqueue: {type: quorum, lazy: true}\n",
    )
    .unwrap();
    let err = load_specs(None, Some(&path), &[]).unwrap_err().to_string();
    assert!(err.contains("field `queue.lazy`"), "{err}");
    assert!(!err.contains("topsecret"), "{err}");
    let err = load_specs(
        None,
        Some(&path),
        &["queue.lazy=false".into(), "quue.x=1".into()],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("did you mean `queue`?"), "{err}");
    let specs = load_specs(None, Some(&path), &["queue.lazy=false".into()]).unwrap();
    assert!(!format!("{specs:?}").contains("topsecret"));
    assert!(!specs.driver.redacted().to_string().contains("topsecret"));
    assert_eq!(
        validate_file(&REGISTRY.schemas(), &path).err().map(|_| ()),
        Some(())
    );
    std::fs::write(&path, "driver: rabbitmq\nqueue: {type: stream}\n").unwrap();
    assert_eq!(validate_file(&REGISTRY.schemas(), &path).unwrap(), "driver");
    let err = load_specs(None, Some(&path), &["partitions_per_topic=4".into()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("field `partitions_per_topic`") && err.contains("set partitions_per_topic: 1"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn secrets_in_overrides_stay_out_of_errors() {
    let err = load_specs(
        None,
        None,
        &[
            "driver=rabbitmq".into(),
            "uri=amqps://u:hunter2@h/?verify=verify_none".into(),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("field `uri`") && err.contains("verify_peer"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let err = load_specs(None, None, &["uri:amqp://u:hunter2@h/".into()])
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn names_are_unique_and_every_builtin_driver_file_loads() {
    let names = REGISTRY.names();
    for (i, name) in names.iter().enumerate() {
        assert!(!names[..i].contains(name), "{name} registered twice");
        let specs = load_specs(None, None, &[format!("driver={name}")]).unwrap();
        assert_eq!(specs.driver.name(), *name);
        let family = REGISTRY.get(name).unwrap();
        let address = family.address(&specs.driver).unwrap();
        // The mock has no broker: its messages stay in brokerbench's own process.
        match *name {
            "mock" => assert_eq!(
                address.as_deref(),
                Some("in-memory (brokerbench's own process)")
            ),
            _ => assert_eq!(
                address, None,
                "{name}: the built-in file uses the managed broker"
            ),
        }
    }
}

#[test]
fn every_familys_broker_metrics_follow_the_one_naming_scheme() {
    for family in REGISTRY.0 {
        let Some(set) = family.metrics() else {
            continue;
        };
        assert_eq!(set.source, family.name());
        for spec in set.specs {
            let key = spec.key;
            let ok = brokerbench_metrics::follows_naming(key);
            assert!(ok, "{}: {key}", family.name());
        }
        let messages_in = set
            .specs
            .iter()
            .any(|s| s.key == brokerbench_metrics::MESSAGES_IN);
        assert!(
            messages_in,
            "{}: no broker count to check the run's against",
            family.name()
        );
    }
}
