//! OpenMessaging Benchmark RabbitMQ driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver`), translated into
//! brokerbench's RabbitMQ driver file the way OMB's driver sets up the broker: a fanout
//! exchange per topic, a durable queue of `queueType` per subscription, publisher confirms,
//! a manual acknowledgement per delivery and no prefetch limit; `messagePersistence` decides
//! the delivery mode. The first of `amqpUris` is the broker.

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::check_driver_keys;
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

/// OMB's RabbitMQ driver class.
pub const OMB_DRIVER_CLASS: &str =
    "io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver";

/// Every field of an OMB RabbitMQ driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &[
    "name",
    "driverClass",
    "amqpUris",
    "messagePersistence",
    "queueType",
    "producerCreationDelay",
    "producerCreationBatchSize",
    "consumerCreationDelay",
    "consumerCreationBatchSize",
];

/// Translates an OMB RabbitMQ driver file into brokerbench's RabbitMQ driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let field = |field: &str, message: String| SpecError::field(file, field, message);
    let uris: Vec<String> = match value.get("amqpUris") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| field("amqpUris", "must be a list of amqp:// URIs".into()))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(field("amqpUris", "must be a list of amqp:// URIs".into())),
    };
    let persistence = match value.get("messagePersistence") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(field("messagePersistence", "must be true or false".into())),
    };
    let queue_type = match value.get("queueType").and_then(Value::as_str) {
        None => "classic",
        Some("CLASSIC") => "classic",
        Some("QUORUM") => "quorum",
        Some("STREAM") => "stream",
        Some(other) => {
            return Err(field(
                "queueType",
                format!("`{other}` is not one of OMB's queue types: CLASSIC, QUORUM, STREAM"),
            ))
        }
    };
    for name in &OMB_DRIVER_FIELDS[5..] {
        if let Some(v) = value.get(*name) {
            if v.as_u64().is_none_or(|n| n >= 1 << 31) {
                return Err(field(name, format!("{v} must be a whole number")));
            }
        }
    }
    Ok(OmbDriver {
        map: driver_map(&uris, persistence, queue_type),
        notes: notes(file, value, &uris, persistence, queue_type),
    })
}

/// The RabbitMQ driver mapping that sets the broker up as OMB's driver does: the first of
/// `uris` as the broker (the others as failover ones), a fanout exchange, durable queues of
/// `queue_type`, confirms, a manual acknowledgement per delivery, no prefetch limit, and
/// persistent messages when `persistence`.
fn driver_map(uris: &[String], persistence: bool, queue_type: &str) -> Value {
    let object = |pairs: &[(&str, Value)]| {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<Mapping>(),
        )
    };
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("rabbitmq"));
    if let Some((first, others)) = uris.split_first() {
        out.insert("uri".into(), Value::from(first.clone()));
        if !others.is_empty() {
            let others = others.iter().cloned().map(Value::from).collect();
            out.insert("failover_uris".into(), Value::Array(others));
        }
    }
    out.insert(
        "exchange".into(),
        object(&[("type", Value::from("fanout"))]),
    );
    out.insert(
        "queue".into(),
        object(&[
            ("type", Value::from(queue_type)),
            ("durable", Value::from(true)),
        ]),
    );
    out.insert("persistent".into(), Value::from(persistence));
    out.insert("confirms".into(), object(&[("enabled", Value::from(true))]));
    out.insert(
        "ack".into(),
        object(&[
            ("mode", Value::from("manual")),
            ("multiple_every", Value::from(1)),
        ]),
    );
    out.insert("prefetch".into(), Value::from(0));
    Value::Object(out)
}

/// What the translation of the OMB driver file `file` (read as `value`) says about itself:
/// the setup, where the brokers come from, and the settings it does not need.
fn notes(
    file: &str,
    value: &Value,
    uris: &[String],
    persistence: bool,
    queue_type: &str,
) -> Vec<String> {
    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark RabbitMQ driver file: a fanout exchange per topic, durable {queue_type} queues, confirms, a manual ack per delivery, no prefetch limit, {} messages",
        if persistence { "persistent" } else { "transient" }
    )];
    match uris.len() {
        0 => notes.push("no amqpUris: the managed local RabbitMQ".into()),
        1 => {}
        n => notes.push(format!(
            "amqpUris lists {n} brokers: brokerbench connects to the first and goes over to the others in turn when a node cannot be reached (failover_uris); OMB spreads its clients over them"
        )),
    }
    if OMB_DRIVER_FIELDS[5..]
        .iter()
        .any(|f| value.get(*f).is_some())
    {
        notes.push("producer and consumer creation delays and batches are not needed: every client is connected before the clock starts".into());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("r.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    const FILE: &str = "name: RabbitMQ\ndriverClass: io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver\nproducerCreationDelay: 100\nproducerCreationBatchSize: 5\namqpUris:\n  - amqp://u:secret@127.0.0.1:5672\nmessagePersistence: false\nqueueType: QUORUM\n";

    #[test]
    fn an_omb_rabbitmq_driver_file_sets_up_what_omb_sets_up() {
        let d = omb(FILE).unwrap();
        let m = &d.map;
        assert_eq!(m["driver"], "rabbitmq");
        assert_eq!(m["uri"], "amqp://u:secret@127.0.0.1:5672");
        assert_eq!(m["queue"]["type"], "quorum");
        assert_eq!(m["exchange"]["type"], "fanout");
        assert_eq!(m["persistent"], false);
        assert_eq!(m["prefetch"], 0);
        assert!(
            d.notes.iter().all(|n| !n.contains("secret")),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn the_other_amqp_uris_are_the_failover_ones() {
        let file = FILE.replace(
            "  - amqp://u:secret@127.0.0.1:5672\n",
            "  - amqp://u:secret@127.0.0.1:5672\n  - amqp://u:secret@127.0.0.1:5673\n",
        );
        let d = omb(&file).unwrap();
        assert_eq!(d.map["uri"], "amqp://u:secret@127.0.0.1:5672");
        assert_eq!(
            d.map["failover_uris"],
            Value::Array(vec!["amqp://u:secret@127.0.0.1:5673".into()])
        );
        assert!(
            d.notes.iter().any(|n| n.contains("failover_uris")),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn omb_rabbitmq_driver_mistakes_are_named() {
        let e = omb(&FILE.replace("QUORUM", "QUOROM"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`queueType`") && e.contains("QUORUM"), "{e}");
        let e = omb(&FILE.replace("amqpUris", "amqpUri"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `amqpUris`"), "{e}");
    }
}
