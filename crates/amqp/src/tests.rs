use super::*;
use std::time::Instant;

fn driver(yaml: &str, uri: &str) -> AmqpDriver {
    let config: RabbitMqDriverConfig = brokerbench_model::yaml::from_str(yaml).unwrap();
    AmqpDriver::new(config, AmqpUri::parse(uri).unwrap())
}

#[test]
fn refused_connection_fails_fast_naming_the_address_without_credentials() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut d = driver("{}", &format!("amqp://bench:hunter2@127.0.0.1:{port}/%2f"));
    let started = Instant::now();
    let e = d.connect().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(
            e,
            DriverError::Unreachable {
                broker: "rabbitmq",
                ..
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("brokerbench broker up rabbitmq"), "{text}");
    assert!(
        !text.contains("hunter2") && !format!("{d:?}").contains("hunter2"),
        "{text}"
    );
}

#[test]
fn subscriptions_are_queues_and_partitions_must_be_one() {
    let mut d = driver("queues_per_topic: 3", "amqp://127.0.0.1:1");
    assert_eq!(d.subscriptions_per_topic(), 3);
    assert!(d.subscription_ready(0, &[1, 1]));
    assert!(!d.subscription_ready(0, &[1, 0]));
    let err = d
        .prepare(&Topology {
            run_id: "r".into(),
            workload: "w".into(),
            topics: 1,
            partitions_per_topic: 4,
            consumers_per_topic: 1,
            subscriptions_per_topic: 1,
            shard: None,
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("partitions_per_topic: 1"), "{err}");
    assert_eq!(driver("{}", "amqp://h").broker_drop_policy(), None);
    assert!(driver("queue: {max_length: 5}", "amqp://h")
        .broker_drop_policy()
        .is_some());
}
