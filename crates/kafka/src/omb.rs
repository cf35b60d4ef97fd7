//! OpenMessaging Benchmark Kafka driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver`): `replicationFactor`, and
//! the Java properties blocks `topicConfig`, `commonConfig`, `producerConfig` and
//! `consumerConfig`, mapped onto brokerbench's Kafka driver file and librdkafka. As OMB's
//! driver does, the common properties go to producers and consumers, and a block's own
//! setting wins; `bootstrap.servers` becomes `bootstrap_servers`. Java client properties are
//! put in librdkafka's terms by [`crate::java_client`] (renamed, left out, or clamped to
//! librdkafka's range, each with a note); a property librdkafka still does not take stops the
//! run before it starts, named.

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::{check_driver_keys, java_properties};
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

use crate::java_client::{self, JAVA_ONLY};

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

/// Translates an OMB Kafka driver file into brokerbench's Kafka driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let replication = replication_factor(file, value)?;
    let mut ignored = Vec::new();
    let common = without_java_only(properties(file, value, "commonConfig")?, &mut ignored);
    let producer = without_java_only(properties(file, value, "producerConfig")?, &mut ignored);
    let consumer = without_java_only(properties(file, value, "consumerConfig")?, &mut ignored);
    let topic = properties(file, value, "topicConfig")?;

    let (bootstrap, shared) = split_bootstrap(common);
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
    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark Kafka driver file: replicationFactor {replication}, its properties passed to librdkafka"
    )];
    // As OMB's driver gives its common properties to every client, so does common_config:
    // the admin client that creates the topics too (it needs the same security settings).
    let mut client_map =
        |own: Vec<(String, String)>, block: &str| client_properties(file, block, own, &mut notes);
    let common = client_map(shared, "commonConfig")?;
    let producer = client_map(producer, "producerConfig")?;
    let consumer = client_map(consumer, "consumerConfig")?;
    out.insert("common_config".into(), common);
    out.insert("producer_config".into(), producer);
    out.insert("consumer_config".into(), consumer);
    match &bootstrap {
        Some(servers) => notes.push(format!(
            "bootstrap.servers={servers}: the run uses the broker there (if that is the managed Kafka of `brokerbench broker up kafka`, the run samples its processes and reads its metrics)"
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

/// The Java properties of the block `name` (a text block of `key=value` lines); none when
/// the file has no such block.
fn properties(file: &str, value: &Value, name: &str) -> Result<Vec<(String, String)>, SpecError> {
    match value.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(java_properties(text)),
        Some(_) => Err(SpecError::field(
            file,
            name,
            "must be a text block of Java properties (`key=value` lines, written after `|`)",
        )),
    }
}

/// `replicationFactor`, which OMB needs: a whole number from 1 to 65535.
fn replication_factor(file: &str, value: &Value) -> Result<u64, SpecError> {
    match value.get("replicationFactor") {
        Some(Value::Number(n))
            if n.as_u64()
                .is_some_and(|n| (1..=u16::MAX as u64).contains(&n)) =>
        {
            Ok(n.as_u64().unwrap_or(1))
        }
        Some(other) => Err(SpecError::field(
            file,
            "replicationFactor",
            format!("{other} must be a whole number of at least 1"),
        )),
        None => Err(SpecError::field(
            file,
            "replicationFactor",
            "missing; OMB needs it (1 on a single broker)",
        )),
    }
}

/// `pairs` without the properties only the Java client has; their names go to `ignored`,
/// each once, for the note that says they were left out.
fn without_java_only(
    pairs: Vec<(String, String)>,
    ignored: &mut Vec<String>,
) -> Vec<(String, String)> {
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
}

/// The common block's `bootstrap.servers` (the run's brokers), if it has one, and its other
/// properties, which go to every client.
fn split_bootstrap(common: Vec<(String, String)>) -> (Option<String>, Vec<(String, String)>) {
    let mut bootstrap = None;
    let mut shared = Vec::new();
    for (key, value) in common {
        if key == "bootstrap.servers" {
            bootstrap = Some(value);
        } else {
            shared.push((key, value));
        }
    }
    (bootstrap, shared)
}

/// One block's properties in librdkafka's terms: Java security settings translated, Java
/// names renamed, numbers outside librdkafka's range clamped (each with a note), then every
/// property checked with librdkafka. `bootstrap.servers` is the run's, not a block's.
fn client_properties(
    file: &str,
    block: &str,
    own: Vec<(String, String)>,
    notes: &mut Vec<String>,
) -> Result<Value, SpecError> {
    let mut map = Mapping::new();
    // librdkafka's name → the name the file used, to catch one setting given twice.
    let mut written_as: Vec<(String, String)> = Vec::new();
    for (key, value) in own {
        if key == "bootstrap.servers" {
            continue;
        }
        for (key, value) in java_security(file, block, key, value)? {
            let (name, value) = librdkafka_terms(block, &key, value, notes);
            if let Some((_, earlier)) = written_as.iter().find(|(n, k)| *n == name && *k != key) {
                if map.get(&name).and_then(Value::as_str) != Some(value.as_str()) {
                    return Err(SpecError::field(
                        file,
                        &format!("{block}.{key}"),
                        format!(
                            "sets librdkafka's {name}, as {block}.{earlier} does, to another value; keep one of them"
                        ),
                    ));
                }
            }
            check_as(file, &format!("{block}.{key}"), &name, &value)?;
            written_as.push((name.clone(), key));
            map.insert(name, Value::from(value));
        }
    }
    Ok(Value::Object(map))
}

/// `key=value` under librdkafka's name and within its range, with a note for each change.
fn librdkafka_terms(
    block: &str,
    key: &str,
    value: String,
    notes: &mut Vec<String>,
) -> (String, String) {
    let name = match java_client::renamed(key) {
        Some(r) => {
            notes.push(format!(
                "{block}.{key}={value} is the Java client's name for {}: passed to librdkafka as {}",
                r.meaning, r.librdkafka
            ));
            r.librdkafka.to_string()
        }
        None => key.to_string(),
    };
    match java_client::clamp(&name, &value) {
        Some(c) => {
            notes.push(format!(
                "{block}.{key}={value} is {} librdkafka's range for {name} ({}): clamped to {}",
                if c.above { "above" } else { "below" },
                c.range,
                c.value
            ));
            (name, c.value)
        }
        None => (name, value),
    }
}

/// Java client security settings in librdkafka's terms: `sasl.jaas.config` with a PLAIN or
/// SCRAM login module becomes `sasl.username` and `sasl.password`; Java key and trust stores
/// are refused with what to set instead. Everything else passes unchanged.
fn java_security(
    file: &str,
    block: &str,
    key: String,
    value: String,
) -> Result<Vec<(String, String)>, SpecError> {
    let field = |message: String| SpecError::field(file, &format!("{block}.{key}"), message);
    if key == "sasl.jaas.config" {
        let module = value.split_whitespace().next().unwrap_or("");
        if !module.ends_with(".PlainLoginModule") && !module.ends_with(".ScramLoginModule") {
            return Err(field(format!(
                "brokerbench reads the user and password of a PlainLoginModule or ScramLoginModule line; `{module}` is neither: set sasl.username and sasl.password (or librdkafka's sasl.* settings for {module}) instead"
            )));
        }
        let option = |name: &str| jaas_option(&value, name);
        return match (option("username"), option("password")) {
            (Some(user), Some(password)) => Ok(vec![
                ("sasl.username".into(), user),
                ("sasl.password".into(), password),
            ]),
            _ => Err(field(
                "needs username=\"…\" and password=\"…\" (librdkafka takes them as sasl.username and sasl.password)".into(),
            )),
        };
    }
    if key.starts_with("ssl.truststore.") || key.starts_with("ssl.keystore.") {
        return Err(field(
            "is a Java key or trust store, which librdkafka does not read: give PEM files instead — ssl.ca.location for the CA that signed the broker's certificate (`keytool -exportcert -rfc -keystore <truststore> -alias <alias>` prints it), ssl.certificate.location and ssl.key.location for a client certificate".into(),
        ));
    }
    Ok(vec![(key, value)])
}

/// The value of `name="…"` in a JAAS configuration line (double quotes, backslash escapes).
fn jaas_option(line: &str, name: &str) -> Option<String> {
    let mut rest = line;
    while let Some(at) = rest.find(name) {
        let before_ok = at == 0 || rest[..at].ends_with(char::is_whitespace);
        let after = rest[at + name.len()..].trim_start();
        if let (true, Some(value)) = (before_ok, after.strip_prefix('=')) {
            let value = value.trim_start().strip_prefix('"')?;
            let mut out = String::new();
            let mut characters = value.chars();
            while let Some(c) = characters.next() {
                match c {
                    '\\' => out.push(characters.next()?),
                    '"' => return Some(out),
                    other => out.push(other),
                }
            }
            return None;
        }
        rest = &rest[at + name.len()..];
    }
    None
}

/// Fails when librdkafka does not take `key=value` (an unknown property or a bad value),
/// naming the field; the value is not repeated (it may be a secret).
pub fn check_property(file: &str, block: &str, key: &str, value: &str) -> Result<(), SpecError> {
    check_as(file, &format!("{block}.{key}"), key, value)
}

/// As [`check_property`], for a property the file wrote as `field` (its Java name).
fn check_as(file: &str, field: &str, key: &str, value: &str) -> Result<(), SpecError> {
    let Some(reason) = java_client::refusal(key, value) else {
        return Ok(());
    };
    let reason = reason.replace(&format!("\"{value}\""), "\"…\"");
    Err(SpecError::field(
        file,
        field,
        format!(
            "librdkafka does not take it: {} (see librdkafka's CONFIGURATION.md for its property names)",
            reason.trim_end()
        ),
    ))
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
            m["common_config"]["client.id"], "bench",
            "common goes to every client"
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
    fn java_sasl_settings_become_librdkafka_ones_and_stores_are_refused() {
        let secure = FILE.replace(
            "  client.id=bench\n",
            "  security.protocol=SASL_SSL\n  sasl.mechanism=SCRAM-SHA-512\n  sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"p\\\"w=1\";\n",
        );
        let d = omb(&secure).unwrap();
        let common = &d.map["common_config"];
        assert_eq!(common["security.protocol"], "SASL_SSL");
        assert_eq!(common["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(common["sasl.username"], "alice");
        assert_eq!(common["sasl.password"], "p\"w=1");
        assert!(common.get("sasl.jaas.config").is_none());

        let kerberos = FILE.replace(
            "  client.id=bench\n",
            "  sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n",
        );
        let e = omb(&kerberos).unwrap_err().to_string();
        assert!(
            e.contains("commonConfig.sasl.jaas.config") && e.contains("Krb5LoginModule"),
            "{e}"
        );
        let no_password = FILE.replace(
            "  client.id=bench\n",
            "  sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\";\n",
        );
        let e = omb(&no_password).unwrap_err().to_string();
        assert!(e.contains("password="), "{e}");
        let store = FILE.replace(
            "  client.id=bench\n",
            "  ssl.truststore.location=/etc/kafka/truststore.jks\n  ssl.truststore.password=changeit\n",
        );
        let e = omb(&store).unwrap_err().to_string();
        assert!(
            e.contains("commonConfig.ssl.truststore.location")
                && e.contains("ssl.ca.location")
                && !e.contains("changeit"),
            "{e}"
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

    #[test]
    fn java_names_are_renamed_and_values_past_librdkafkas_range_clamped_with_notes() {
        // OMB's kafka-big-batches and kafka-throughput settings.
        let file = FILE
            .replace("  linger.ms=1\n", "  linger.ms=1\n  max.request.size=4194304\n")
            .replace(
                "  client.id=bench\n",
                "  client.id=bench\n  default.api.timeout.ms=1200000\n  request.timeout.ms=1200000\n",
            );
        let d = omb(&file).unwrap();
        let m = &d.map;
        assert_eq!(m["producer_config"]["message.max.bytes"], "4194304");
        assert!(m["producer_config"].get("max.request.size").is_none());
        assert_eq!(m["common_config"]["request.timeout.ms"], "900000");
        assert!(m["common_config"].get("default.api.timeout.ms").is_none());
        let notes = d.notes.join("\n");
        for said in [
            "producerConfig.max.request.size=4194304 is the Java client's name for the largest produce request: passed to librdkafka as message.max.bytes",
            "commonConfig.request.timeout.ms=1200000 is above librdkafka's range for request.timeout.ms (1..900000): clamped to 900000",
            "default.api.timeout.ms",
        ] {
            assert!(notes.contains(said), "{said}:\n{notes}");
        }
        // A renamed property is checked under librdkafka's name, named as the file wrote it.
        let e = omb(&file.replace("max.request.size=4194304", "max.request.size=big"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("producerConfig.max.request.size") && e.contains("message.max.bytes"),
            "{e}"
        );
        // Both names of one setting: the same value is one setting, two values are refused.
        let both = |value: &str| {
            omb(&file.replace(
                "  max.request.size=4194304\n",
                &format!("  max.request.size=4194304\n  message.max.bytes={value}\n"),
            ))
        };
        assert!(both("4194304").is_ok());
        let e = both("2000000").unwrap_err().to_string();
        assert!(
            e.contains("producerConfig.message.max.bytes")
                && e.contains("producerConfig.max.request.size")
                && e.contains("keep one"),
            "{e}"
        );
    }
}
