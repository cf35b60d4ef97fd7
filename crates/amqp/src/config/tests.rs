use super::*;

fn rabbitmq(yaml: &str) -> Result<RabbitMqDriverConfig, String> {
    let config: RabbitMqDriverConfig =
        brokerbench_model::yaml::from_str(yaml).map_err(|e| e.to_string())?;
    config
        .validate()
        .map_err(|e| format!("{}: {}", e.field, e.message))?;
    Ok(config)
}

#[test]
fn rabbitmq_defaults_are_the_documented_ones() {
    let c = RabbitMqDriverConfig::default();
    assert_eq!(c.uri, None);
    assert_eq!(c.exchange.name, "brokerbench");
    assert_eq!(c.exchange.kind, ExchangeKind::Direct);
    assert_eq!(c.queues_per_topic, 1);
    assert_eq!(c.queue.kind, QueueKind::Classic);
    assert!(c.queue.durable && !c.queue.lazy);
    assert_eq!((c.queue.max_length, c.queue.max_length_bytes), (None, None));
    assert_eq!(c.queue.overflow, Overflow::DropHead);
    assert!(c.persistent);
    assert!(c.confirms.enabled);
    assert_eq!(c.confirms.max_outstanding, 1000);
    assert_eq!(c.ack.mode, AckMode::Manual);
    assert_eq!(c.ack.multiple_every, 1);
    assert_eq!(c.prefetch, 1000);
    assert_eq!(c.channels_per_connection, 1);
    assert!(c.delete_queues);
    assert!(c.validate().is_ok());
    assert_eq!(c.drop_policy(), None);
}

#[test]
fn partial_nested_mappings_keep_their_other_defaults() {
    let c = rabbitmq("exchange: {type: fanout}\nqueue: {max_length_bytes: 64MiB}").unwrap();
    assert_eq!(c.exchange.name, "brokerbench");
    assert_eq!(c.exchange.kind, ExchangeKind::Fanout);
    assert_eq!(c.queue.max_length_bytes, Some(64 << 20));
    assert!(c.queue.durable);
}

#[test]
fn invalid_combinations_name_the_field_and_the_fix() {
    for (yaml, field, fix) in [
        (
            "queue: {type: quorum, durable: false}",
            "queue.durable",
            "queue.durable: true",
        ),
        (
            "queue: {type: stream, durable: false}",
            "queue.durable",
            "queue.type: classic",
        ),
        (
            "queue: {type: quorum, lazy: true}",
            "queue.lazy",
            "queue.type: classic",
        ),
        (
            "queue: {initial_group_size: 3}",
            "queue.initial_group_size",
            "queue.type: quorum",
        ),
        (
            "queue: {type: quorum, initial_group_size: 0}",
            "queue.initial_group_size",
            "at least 1",
        ),
        (
            "queue: {type: stream}\nack: {mode: auto}",
            "ack.mode",
            "ack.mode: manual",
        ),
        (
            "queue: {type: stream}\nprefetch: 0",
            "prefetch",
            "prefetch to 1 or more",
        ),
        (
            "queue: {type: stream, max_length: 5}",
            "queue.max_length",
            "max_length_bytes",
        ),
        (
            "queue: {overflow: reject-publish}",
            "queue.overflow",
            "queue.max_length",
        ),
        (
            "queue: {overflow: reject-publish, max_length: 10}\nconfirms: {enabled: false}",
            "confirms.enabled",
            "confirms.enabled: true",
        ),
        (
            "confirms: {max_outstanding: 0}",
            "confirms.max_outstanding",
            "at least 1",
        ),
        (
            "ack: {multiple_every: 0}",
            "ack.multiple_every",
            "at least 1",
        ),
        (
            "ack: {mode: auto, multiple_every: 10}",
            "ack.multiple_every",
            "ack.mode: manual",
        ),
        (
            "prefetch: 10\nack: {multiple_every: 20}",
            "ack.multiple_every",
            "raise prefetch",
        ),
        ("queues_per_topic: 0", "queues_per_topic", "at least 1"),
        (
            "channels_per_connection: 0",
            "channels_per_connection",
            "at least 1",
        ),
        (
            "exchange: {name: amq.direct}",
            "exchange.name",
            "brokerbench",
        ),
    ] {
        let err = rabbitmq(yaml).unwrap_err();
        assert!(err.starts_with(&format!("{field}:")), "{yaml}: {err}");
        assert!(err.contains(fix), "{yaml}: {err}");
    }
    assert!(rabbitmq("queue: {overflow: reject-publish, max_length: 10}").is_ok());
    assert!(rabbitmq("queue: {type: stream, max_length_bytes: 1GiB}").is_ok());
    assert!(rabbitmq("prefetch: 0\nack: {multiple_every: 5000}").is_ok());
}

#[test]
fn unknown_fields_and_values_are_rejected() {
    let err = rabbitmq("queue: {tpye: quorum}").unwrap_err();
    assert!(err.contains("unknown field `tpye`"), "{err}");
    let err = rabbitmq("exchange: {type: fanot}").unwrap_err();
    assert!(err.contains("unknown variant `fanot`"), "{err}");
    let err = rabbitmq("queue: {max_length_bytes: 12 apples}").unwrap_err();
    assert!(err.contains("unknown size unit"), "{err}");
}

#[test]
fn drop_policy_only_for_length_limits_that_drop() {
    let c = rabbitmq("queue: {max_length: 100}").unwrap();
    let reason = c.drop_policy().unwrap();
    assert!(
        reason.contains("max_length: 100") && reason.contains("drop-head"),
        "{reason}"
    );
    let c = rabbitmq("queue: {max_length: 100, overflow: reject-publish}").unwrap();
    assert_eq!(
        c.drop_policy(),
        None,
        "rejected messages are never acknowledged"
    );
    let c = rabbitmq("queue: {type: stream, max_length_bytes: 1000000}").unwrap();
    assert!(c.drop_policy().unwrap().contains("stream"));
}

#[test]
fn uris_parse_with_defaults_and_decoding() {
    let u = AmqpUri::parse("amqp://guest:guest@127.0.0.1:5672/%2f").unwrap();
    assert_eq!(u, AmqpUri::localhost(5672));
    assert_eq!(u.redacted(), "amqp://guest:***@127.0.0.1:5672/%2f");
    assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 5672));
    assert_eq!((u.username.as_str(), u.password()), ("guest", "guest"));
    assert_eq!(u.vhost, "/");
    let u = AmqpUri::parse("amqp://bench:p%40ss%2Fw0rd@broker.example/prod?heartbeat=10").unwrap();
    assert_eq!(u.password(), "p@ss/w0rd");
    assert_eq!(
        (u.port, u.vhost.as_str(), u.heartbeat),
        (5672, "prod", Some(10))
    );
    let u = AmqpUri::parse("amqp://[::1]:5799").unwrap();
    assert_eq!(
        (u.host.as_str(), u.port, u.vhost.as_str()),
        ("::1", 5799, "/")
    );
    assert_eq!(u.address(), "[::1]:5799");
    assert_eq!((u.username.as_str(), u.password()), ("guest", "guest"));
    for (bad, says) in [
        ("127.0.0.1:5672", "not a URI"),
        ("amqp://h?cacertfile=/ca.pem", "amqps"),
        ("amqps://h?verify=verify_none", "verify_peer"),
        ("amqps://h?auth_mechanism=external", "certfile"),
        ("amqp://h?auth_mechanism=external", "amqps"),
        ("amqp://h?auth_mechanism=scram", "external"),
        ("http://h", "scheme"),
        ("amqp://h:99999", "port"),
        ("amqp://h/a/b", "%2f"),
        ("amqp://h?frame_max=1", "heartbeat"),
        ("amqp:///vh", "no host"),
    ] {
        let err = AmqpUri::parse(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn amqps_uris_carry_their_tls_files_and_mechanism() {
    let u = AmqpUri::parse("amqps://bench:pw@broker.example/%2f?cacertfile=%2Fetc%2Fca.pem&certfile=/c.pem&keyfile=/k.pem&server_name_indication=mq.example&auth_mechanism=external&verify=verify_peer").unwrap();
    assert_eq!(u.port, AMQPS_DEFAULT_PORT);
    let tls = u.tls.as_ref().unwrap();
    assert_eq!(
        tls.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/ca.pem"))
    );
    assert_eq!(
        tls.cert_file.as_deref(),
        Some(std::path::Path::new("/c.pem"))
    );
    assert_eq!(
        tls.key_file.as_deref(),
        Some(std::path::Path::new("/k.pem"))
    );
    assert_eq!(tls.server_name.as_deref(), Some("mq.example"));
    assert!(u.external);
    let shown = u.redacted();
    assert!(
        shown.starts_with("amqps://bench:***@broker.example:5671/%2f?cacertfile="),
        "{shown}"
    );
    assert!(
        shown.contains("auth_mechanism=external") && !shown.contains("pw@"),
        "{shown}"
    );
    // The redacted form reads back to the same settings.
    let again = AmqpUri::parse(&shown).unwrap();
    assert_eq!((again.tls, again.external), (u.tls.clone(), true));
    let plain = AmqpUri::parse("amqps://h").unwrap();
    assert_eq!((plain.port, plain.external), (5671, false));
    assert_eq!(plain.tls, Some(Default::default()));
}

#[test]
fn the_password_never_shows() {
    let secret = "s3cr%2Ft-pw";
    let text = format!("amqp://bench:{secret}@10.1.2.3:5673/vh");
    let u = AmqpUri::parse(&text).unwrap();
    assert_eq!(u.password(), "s3cr/t-pw");
    for shown in [
        format!("{u:?}"),
        u.to_string(),
        u.redacted(),
        serde_json::to_string(&u).unwrap(),
    ] {
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(shown.contains("bench:***@10.1.2.3:5673/vh"), "{shown}");
    }
    let config: RabbitMqDriverConfig =
        brokerbench_model::yaml::from_str(&format!("uri: {text}")).unwrap();
    assert!(!format!("{config:?}").contains("s3cr"));
    let redacted = brokerbench_model::family::resolved("rabbitmq", &config).to_string();
    assert!(!redacted.contains("s3cr"), "{redacted}");
    assert!(redacted.contains("\"driver\":\"rabbitmq\""), "{redacted}");
    // A password with a raw '@' or '/' still stays out of errors.
    for bad in [
        "amqp://u:pa@ss:word@h:notaport/",
        "amqp://u:pa/ss@h:notaport",
        "amqp://u:pa%zzss@h",
    ] {
        let err =
            brokerbench_model::yaml::from_str::<RabbitMqDriverConfig>(&format!("uri: '{bad}'"))
                .unwrap_err()
                .to_string();
        assert!(
            !err.contains("pa@ss") && !err.contains("pa/ss") && !err.contains("zz"),
            "{err}"
        );
    }
}

#[test]
fn failover_uris_go_with_a_uri() {
    let c = rabbitmq(
        "uri: amqp://u:p@10.0.0.1:5672/%2f\nfailover_uris: [amqp://u:p@10.0.0.2:5672/%2f, amqp://u:p@10.0.0.3:5672/%2f]",
    )
    .unwrap();
    let others: Vec<String> = c.failover_uris.iter().map(|u| u.address()).collect();
    assert_eq!(others, ["10.0.0.2:5672", "10.0.0.3:5672"]);
    assert!(RabbitMqDriverConfig::default().failover_uris.is_empty());
    let e = rabbitmq("failover_uris: [amqp://u:p@10.0.0.2:5672/%2f]").unwrap_err();
    assert!(e.starts_with("failover_uris: goes with uri"), "{e}");
}
