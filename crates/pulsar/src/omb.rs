//! OpenMessaging Benchmark Pulsar driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver`): `client`, `producer` and
//! `consumer` sections. As OMB does, a run gets a namespace of its own
//! (`<namespacePrefix>-<run id>`, its tenant created if missing) with the file's persistence
//! policies (OMB's defaults when the file has none: ensemble 3, write quorum 3, ack quorum 2).

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::check_driver_keys;
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

/// OMB's Pulsar driver class.
pub const OMB_DRIVER_CLASS: &str = "io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver";

/// Every top-level field of an OMB Pulsar driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &["name", "driverClass", "client", "producer", "consumer"];

const CLIENT_FIELDS: &[&str] = &[
    "serviceUrl",
    "httpUrl",
    "ioThreads",
    "connectionsPerBroker",
    "namespacePrefix",
    "clusterName",
    "topicType",
    "persistence",
    "astraStreaming",
    "tlsAllowInsecureConnection",
    "tlsEnableHostnameVerification",
    "tlsTrustCertsFilePath",
    "authentication",
];
const PERSISTENCE_FIELDS: &[&str] = &[
    "ensembleSize",
    "writeQuorum",
    "ackQuorum",
    "deduplicationEnabled",
];
const AUTH_FIELDS: &[&str] = &["plugin", "data"];
const PRODUCER_FIELDS: &[&str] = &[
    "batchingEnabled",
    "blockIfQueueFull",
    "batchingMaxPublishDelayMs",
    "batchingMaxBytes",
    "batchingMaxMessages",
    "pendingQueueSize",
];
const CONSUMER_FIELDS: &[&str] = &["receiverQueueSize", "subscriptionType"];

/// The token plugin OMB files name.
const TOKEN_PLUGIN: &str = "org.apache.pulsar.client.impl.auth.AuthenticationToken";
/// The client-certificate plugin.
const TLS_PLUGIN: &str = "org.apache.pulsar.client.impl.auth.AuthenticationTls";

/// A section of the file, its unknown keys refused with their whole path.
fn section<'a>(
    file: &str,
    value: &'a Value,
    name: &str,
    fields: &[&str],
) -> Result<Option<&'a Value>, SpecError> {
    let Some(section) = value.get(name).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    if !section.is_object() {
        return Err(SpecError::field(file, name, "must be a mapping"));
    }
    check_driver_keys(file, section, fields).map_err(|e| match e {
        SpecError::Field { field, message, .. } => {
            SpecError::field(file, &format!("{name}.{field}"), message)
        }
        other => other,
    })?;
    Ok(Some(section))
}

/// Translates an OMB Pulsar driver file into brokerbench's Pulsar driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("pulsar"));
    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark Pulsar driver file: brokerbench's own client on Pulsar's binary protocol, one connection per producer and consumer (ioThreads and connectionsPerBroker do not apply)"
    )];
    if let Some(client) = section(file, value, "client", CLIENT_FIELDS)? {
        translate_client(file, client, &mut out, &mut notes)?;
    } else {
        out.insert("persistence".into(), omb_persistence(None, file)?);
    }
    if let Some(producer) = section(file, value, "producer", PRODUCER_FIELDS)? {
        translate_producer(file, producer, &mut out)?;
    }
    if let Some(consumer) = section(file, value, "consumer", CONSUMER_FIELDS)? {
        copy_number(
            file,
            consumer,
            "consumer.receiverQueueSize",
            "receiverQueueSize",
            "receiver_queue_size",
            &mut out,
        )?;
        if let Some(kind) = consumer.get("subscriptionType").and_then(Value::as_str) {
            out.insert("subscription_type".into(), Value::from(kind));
        }
    }
    Ok(OmbDriver {
        map: Value::Object(out),
        notes,
    })
}

fn translate_client(
    file: &str,
    client: &Value,
    out: &mut Mapping,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    for (omb, ours) in [
        ("serviceUrl", "service_url"),
        ("httpUrl", "http_url"),
        ("topicType", "topic_type"),
    ] {
        if let Some(text) = client.get(omb).and_then(Value::as_str) {
            out.insert(ours.into(), Value::from(text));
        }
    }
    if let Some(prefix) = client.get("namespacePrefix").and_then(Value::as_str) {
        let parts: Vec<&str> = prefix.split('/').collect();
        let namespace = match parts.as_slice() {
            [tenant, ns] => format!("{tenant}/{ns}"),
            // The old form with a cluster: tenant/cluster/namespace.
            [tenant, _, ns] => format!("{tenant}/{ns}"),
            _ => {
                return Err(SpecError::field(
                    file,
                    "client.namespacePrefix",
                    format!("'{prefix}' is not tenant/namespace (e.g. benchmark/ns)"),
                ))
            }
        };
        notes.push(format!("namespacePrefix {prefix}: each run's topics go in a namespace of its own, {namespace}-<run id>, deleted afterwards"));
        out.insert("namespace".into(), Value::from(namespace));
    }
    let persistence = section(file, client, "persistence", PERSISTENCE_FIELDS)
        .map_err(|e| prefixed(e, "client."))?;
    out.insert("persistence".into(), omb_persistence(persistence, file)?);
    let auth =
        section(file, client, "authentication", AUTH_FIELDS).map_err(|e| prefixed(e, "client."))?;
    let mut tls = Mapping::new();
    match auth.map(|a| credentials(file, a)).transpose()?.flatten() {
        Some(Credentials::Token(token)) => {
            out.insert("auth_token".into(), Value::from(token));
        }
        Some(Credentials::Certificate(certificate, key)) => {
            tls.insert("cert_file".into(), Value::from(certificate));
            tls.insert("key_file".into(), Value::from(key));
        }
        None => {}
    }
    translate_tls(file, client, tls, out, notes)
}

/// `tlsTrustCertsFilePath` (and a client certificate) as the `tls:` block, for a
/// `pulsar+ssl://` service URL; `tlsAllowInsecureConnection: true` is refused, since
/// brokerbench always checks the broker's certificate.
fn translate_tls(
    file: &str,
    client: &Value,
    mut tls: Mapping,
    out: &mut Mapping,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let secure = out
        .get("service_url")
        .and_then(Value::as_str)
        .is_some_and(|url| url.starts_with("pulsar+ssl://"));
    if !secure && !tls.is_empty() {
        return Err(SpecError::field(
            file,
            "client.authentication.plugin",
            format!("{TLS_PLUGIN} logs in with a client certificate, which needs TLS: write serviceUrl: pulsar+ssl://host:6651"),
        ));
    }
    if !secure {
        return Ok(());
    }
    if client
        .get("tlsAllowInsecureConnection")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Err(SpecError::field(file, "client.tlsAllowInsecureConnection", "brokerbench always checks the broker's certificate: set it to false and give the CA that signed it as tlsTrustCertsFilePath"));
    }
    if let Some(ca) = client
        .get("tlsTrustCertsFilePath")
        .and_then(Value::as_str)
        .filter(|path| !path.is_empty())
    {
        tls.insert("ca_file".into(), Value::from(ca));
    }
    notes.push("TLS: the broker's certificate is checked against the host name too, whatever tlsEnableHostnameVerification says".into());
    out.insert("tls".into(), Value::Object(tls));
    Ok(())
}

/// A section's error named under its parent (`client.persistence.x`).
fn prefixed(e: SpecError, parent: &str) -> SpecError {
    match e {
        SpecError::Field {
            file,
            field,
            message,
        } => SpecError::Field {
            file,
            field: format!("{parent}{field}"),
            message,
        },
        other => other,
    }
}

/// The persistence mapping: the file's, else OMB's defaults (3, 3, 2).
fn omb_persistence(section: Option<&Value>, file: &str) -> Result<Value, SpecError> {
    let number = |key: &str, default: u64| -> Result<u64, SpecError> {
        match section.and_then(|s| s.get(key)) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| {
                SpecError::field(
                    file,
                    &format!("client.persistence.{key}"),
                    "must be a whole number",
                )
            }),
        }
    };
    let mut map = Mapping::new();
    map.insert(
        "ensemble_size".into(),
        Value::from(number("ensembleSize", 3)?),
    );
    map.insert(
        "write_quorum".into(),
        Value::from(number("writeQuorum", 3)?),
    );
    map.insert("ack_quorum".into(), Value::from(number("ackQuorum", 2)?));
    let dedup = section
        .and_then(|s| s.get("deduplicationEnabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    map.insert("deduplication".into(), Value::from(dedup));
    Ok(Value::Object(map))
}

/// What `authentication` logs in with.
enum Credentials {
    Token(String),
    /// The client certificate and its key (PEM files).
    Certificate(String, String),
}

/// The credentials of `authentication`: `plugin: …AuthenticationToken` with `data:
/// token:XYZ`, or `plugin: …AuthenticationTls` with `data: tlsCertFile:…,tlsKeyFile:…` (or
/// the same as JSON).
fn credentials(file: &str, auth: &Value) -> Result<Option<Credentials>, SpecError> {
    let plugin = auth.get("plugin").and_then(Value::as_str).unwrap_or("");
    let data = auth.get("data").and_then(Value::as_str).unwrap_or("");
    match plugin {
        "" => Ok(None),
        TOKEN_PLUGIN => match data.strip_prefix("token:") {
            Some(token) => Ok(Some(Credentials::Token(token.to_string()))),
            None => Err(SpecError::field(
                file,
                "client.authentication.data",
                "write token:<the token> (a file:// token is not read)",
            )),
        },
        TLS_PLUGIN => certificate_files(data).map(Some).ok_or_else(|| {
            SpecError::field(
                file,
                "client.authentication.data",
                "write tlsCertFile:<client certificate PEM>,tlsKeyFile:<its key PEM>",
            )
        }),
        other => Err(SpecError::field(file, "client.authentication.plugin", format!("{other}: brokerbench's Pulsar client logs in by token ({TOKEN_PLUGIN}) or client certificate ({TLS_PLUGIN})"))),
    }
}

/// `tlsCertFile:/a.pem,tlsKeyFile:/b.pem`, or `{"tlsCertFile": …, "tlsKeyFile": …}`.
fn certificate_files(data: &str) -> Option<Credentials> {
    let json: Option<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(data).ok();
    let value = |key: &str| -> Option<String> {
        if let Some(map) = &json {
            return map.get(key)?.as_str().map(str::to_string);
        }
        data.split(',')
            .find_map(|pair| pair.trim().strip_prefix(key)?.strip_prefix(':'))
            .map(|path| path.trim().to_string())
    };
    Some(Credentials::Certificate(
        value("tlsCertFile")?,
        value("tlsKeyFile")?,
    ))
}

fn translate_producer(file: &str, producer: &Value, out: &mut Mapping) -> Result<(), SpecError> {
    if let Some(on) = producer.get("batchingEnabled").and_then(Value::as_bool) {
        out.insert("batching".into(), Value::from(on));
    }
    if let Some(ms) = producer.get("batchingMaxPublishDelayMs") {
        let ms = ms.as_u64().ok_or_else(|| {
            SpecError::field(
                file,
                "producer.batchingMaxPublishDelayMs",
                "must be a whole number of milliseconds",
            )
        })?;
        out.insert(
            "batching_max_publish_delay".into(),
            Value::from(format!("{ms}ms")),
        );
    }
    copy_number(
        file,
        producer,
        "producer.batchingMaxBytes",
        "batchingMaxBytes",
        "batching_max_bytes",
        out,
    )?;
    copy_number(
        file,
        producer,
        "producer.batchingMaxMessages",
        "batchingMaxMessages",
        "batching_max_messages",
        out,
    )?;
    // 0 is OMB's "the client's default".
    if let Some(n) = producer
        .get("pendingQueueSize")
        .and_then(Value::as_u64)
        .filter(|&n| n > 0)
    {
        out.insert("max_pending_messages".into(), Value::from(n));
    }
    Ok(())
}

/// Copies the whole number `key` of `section` to `ours`.
fn copy_number(
    file: &str,
    section: &Value,
    path: &str,
    key: &str,
    ours: &str,
    out: &mut Mapping,
) -> Result<(), SpecError> {
    match section.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(v) => {
            let n = v
                .as_u64()
                .ok_or_else(|| SpecError::field(file, path, "must be a whole number"))?;
            out.insert(ours.into(), Value::from(n));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("p.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    #[test]
    fn omb_pulsar_yaml_translates() {
        let d = omb("name: Pulsar\ndriverClass: io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver\nclient:\n    serviceUrl : pulsar://localhost:6650\n    httpUrl : http://localhost:8080\n    ioThreads : 8\n    connectionsPerBroker : 8\n    namespacePrefix : benchmark/local/ns\n    topicType: persistent\n    persistence:\n      ensembleSize : 3\n      writeQuorum : 3\n      ackQuorum : 2\nproducer:\n    batchingEnabled : true\n    batchingMaxPublishDelayMs : 1\n    blockIfQueueFull : true\n").unwrap();
        assert_eq!(d.map["service_url"], "pulsar://localhost:6650");
        assert_eq!(d.map["namespace"], "benchmark/ns");
        assert_eq!(d.map["persistence"]["ensemble_size"], 3);
        assert_eq!(d.map["batching_max_publish_delay"], "1ms");
        let e = omb("driverClass: x\nclient:\n  persistence:\n    ensemblesize: 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("client.persistence.ensemblesize") && e.contains("ensembleSize"),
            "{e}"
        );
        let d = omb("driverClass: x\nclient:\n  authentication:\n    plugin: org.apache.pulsar.client.impl.auth.AuthenticationToken\n    data: token:s3cret\nconsumer:\n  subscriptionType: Shared\n  receiverQueueSize: 10000\n").unwrap();
        assert_eq!(d.map["auth_token"], "s3cret");
        assert_eq!(d.map["subscription_type"], "Shared");
        assert!(!format!("{d:?}").contains("s3cret"));
        let d = omb("driverClass: x\nclient:\n  serviceUrl: pulsar+ssl://b:6651\n  tlsAllowInsecureConnection: false\n  tlsTrustCertsFilePath: /ca.pem\n  authentication:\n    plugin: org.apache.pulsar.client.impl.auth.AuthenticationTls\n    data: tlsCertFile:/c.pem,tlsKeyFile:/k.pem\n").unwrap();
        assert_eq!(
            (
                &d.map["tls"]["ca_file"],
                &d.map["tls"]["cert_file"],
                &d.map["tls"]["key_file"]
            ),
            (
                &Value::from("/ca.pem"),
                &Value::from("/c.pem"),
                &Value::from("/k.pem")
            )
        );
        let e = omb("driverClass: x\nclient:\n  serviceUrl: pulsar+ssl://b:6651\n  tlsAllowInsecureConnection: true\n").unwrap_err();
        assert!(
            e.to_string().contains("client.tlsAllowInsecureConnection"),
            "{e}"
        );
        let plain = omb("driverClass: x\nclient:\n  serviceUrl: pulsar://b:6650\n  tlsTrustCertsFilePath: /ca.pem\n").unwrap();
        assert!(plain.map.get("tls").is_none());
    }
}
