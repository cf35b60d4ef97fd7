//! OpenMessaging Benchmark Kafka driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver`): `replicationFactor`, and
//! the Java properties blocks `topicConfig`, `commonConfig`, `producerConfig` and
//! `consumerConfig`, mapped onto brokerbench's Kafka driver file and librdkafka. As OMB's
//! driver does, the common properties go to producers and consumers, and a block's own
//! setting wins; `bootstrap.servers` becomes `bootstrap_servers`. Properties only the Java
//! client has (serializers, `buffer.memory`, …) are left out with a note; a property
//! librdkafka does not know stops the run before it starts, named.

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::{check_driver_keys, java_properties};
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;
use rdkafka::config::ClientConfig;

/// OMB's Kafka driver class.
pub const OMB_DRIVER_CLASS: &str = "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver";

/// Every field of an OMB Kafka driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &[
    "name",
    "driverClass",
    "replicationFactor",
    "topicConfig",
    "commonConfig",
    "producerConfig",
    "consumerConfig",
];

/// Java client settings with no librdkafka counterpart: the Java client's classes and its
/// own buffer and blocking limits. Left out, with a note.
const JAVA_ONLY: &[&str] = &[
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "buffer.memory",
    "max.block.ms",
    "interceptor.classes",
    "partitioner.class",
    "metric.reporters",
    "client.dns.lookup",
    "default.api.timeout.ms",
];

/// Translates an OMB Kafka driver file into brokerbench's Kafka driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let field = |field: &str, message: String| SpecError::field(file, field, message);
    let properties = |name: &str| -> Result<Vec<(String, String)>, SpecError> {
        match value.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(text)) => Ok(java_properties(text)),
            Some(_) => Err(field(
                name,
                "must be a text block of Java properties (`key=value` lines, written after `|`)"
                    .into(),
            )),
        }
    };
    let replication = match value.get("replicationFactor") {
        Some(Value::Number(n))
            if n.as_u64()
                .is_some_and(|n| (1..=u16::MAX as u64).contains(&n)) =>
        {
            n.as_u64().unwrap_or(1)
        }
        Some(other) => {
            return Err(field(
                "replicationFactor",
                format!("{other} must be a whole number of at least 1"),
            ))
        }
        None => {
            return Err(field(
                "replicationFactor",
                "missing; OMB needs it (1 on a single broker)".into(),
            ))
        }
    };
    let mut ignored = Vec::new();
    let mut keep = |pairs: Vec<(String, String)>| -> Vec<(String, String)> {
        pairs
            .into_iter()
            .filter(|(k, _)| {
                let java = JAVA_ONLY.contains(&k.as_str());
                if java && !ignored.contains(k) {
                    ignored.push(k.clone());
                }
                !java
            })
            .collect()
    };
    let common = keep(properties("commonConfig")?);
    let producer = keep(properties("producerConfig")?);
    let consumer = keep(properties("consumerConfig")?);
    let topic = properties("topicConfig")?;

    let mut bootstrap = None;
    let mut shared = Vec::new();
    for (key, value) in common {
        if key == "bootstrap.servers" {
            bootstrap = Some(value);
        } else {
            shared.push((key, value));
        }
    }
    let client_map = |own: Vec<(String, String)>, block: &str| -> Result<Value, SpecError> {
        let mut map = Mapping::new();
        for (key, value) in shared.iter().cloned().chain(own) {
            if key == "bootstrap.servers" {
                continue;
            }
            check_property(file, block, &key, &value)?;
            map.insert(key, Value::from(value));
        }
        Ok(Value::Object(map))
    };
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("kafka"));
    if let Some(servers) = &bootstrap {
        out.insert("bootstrap_servers".into(), Value::from(servers.clone()));
    }
    out.insert("replication_factor".into(), Value::from(replication));
    out.insert(
        "topic_config".into(),
        Value::Object(
            topic
                .into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect(),
        ),
    );
    out.insert(
        "producer_config".into(),
        client_map(producer, "producerConfig")?,
    );
    out.insert(
        "consumer_config".into(),
        client_map(consumer, "consumerConfig")?,
    );

    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark Kafka driver file: replicationFactor {replication}, its properties passed to librdkafka"
    )];
    match &bootstrap {
        Some(servers) => notes.push(format!(
            "bootstrap.servers={servers}: the run uses the broker there (`brokerbench broker up kafka` starts the managed one at 127.0.0.1:9092)"
        )),
        None => notes.push("no bootstrap.servers: the managed local Kafka".into()),
    }
    if !ignored.is_empty() {
        notes.push(format!(
            "left out, as only the Java client has them: {}",
            ignored.join(", ")
        ));
    }
    Ok(OmbDriver {
        map: Value::Object(out),
        notes,
    })
}

/// Fails when librdkafka does not take `key=value` (an unknown property or a bad value),
/// naming the field; the value is not repeated (it may be a secret).
pub fn check_property(file: &str, block: &str, key: &str, value: &str) -> Result<(), SpecError> {
    let mut config = ClientConfig::new();
    config.set(key, value);
    match config.create_native_config() {
        Ok(_) => Ok(()),
        Err(e) => {
            // librdkafka's own words, without rust-rdkafka's echo of the key and value.
            let reason = match &e {
                rdkafka::error::KafkaError::ClientConfig(_, description, _, _) => {
                    description.clone()
                }
                other => other.to_string(),
            };
            let reason = reason.replace(&format!("\"{value}\""), "\"…\"");
            Err(SpecError::field(
                file,
                &format!("{block}.{key}"),
                format!(
                    "librdkafka does not take it: {reason} (see librdkafka's CONFIGURATION.md for its property names)"
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("k.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    /// An OMB-style Kafka driver file, written here in OMB's format.
    const FILE: &str = "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\nreplicationFactor: 3\ntopicConfig: |\n  min.insync.replicas=2\ncommonConfig: |\n  bootstrap.servers=localhost:9092\n  client.id=bench\nproducerConfig: |\n  acks=all\n  linger.ms=1\n  key.serializer=org.apache.kafka.common.serialization.StringSerializer\nconsumerConfig: |\n  auto.offset.reset=earliest\n  client.id=reader\n";

    #[test]
    fn an_omb_kafka_driver_file_maps_onto_librdkafka() {
        let d = omb(FILE).unwrap();
        let m = &d.map;
        assert_eq!(m["driver"], "kafka");
        assert_eq!(m["bootstrap_servers"], "localhost:9092");
        assert_eq!(m["replication_factor"], 3);
        assert_eq!(m["topic_config"]["min.insync.replicas"], "2");
        assert_eq!(m["producer_config"]["acks"], "all");
        assert_eq!(
            m["producer_config"]["client.id"], "bench",
            "common goes to producers"
        );
        assert_eq!(
            m["consumer_config"]["client.id"], "reader",
            "a block's own setting wins"
        );
        assert!(m["producer_config"].get("key.serializer").is_none());
        assert!(m["producer_config"].get("bootstrap.servers").is_none());
        assert!(
            d.notes.iter().any(|n| n.contains("key.serializer")),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn omb_kafka_driver_mistakes_are_named() {
        let e = omb(&FILE.replace("linger.ms=1", "linger.mss=1"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("producerConfig.linger.mss") && e.contains("librdkafka"),
            "{e}"
        );
        let e = omb(&FILE.replace("replicationFactor", "replicationFactr"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `replicationFactor`"), "{e}");
        let e = omb(&FILE.replace("replicationFactor: 3", "replicationFactor: 0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`replicationFactor`"), "{e}");
        let e = omb(&FILE.replace("acks=all", "acks=sometimes"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("producerConfig.acks") && !e.contains("sometimes"),
            "{e}"
        );
    }
}
