//! OpenMessaging Benchmark NATS driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver`, OMB's JetStream driver):
//! `natsHostUrl` is the server, `replicationFactor` the stream replicas, `storageType`
//! (`File`, `Memory`) the stream storage, `maxBytes` (-1: none) the stream's byte limit.

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::check_driver_keys;
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

/// OMB's NATS (JetStream) driver class.
pub const OMB_DRIVER_CLASS: &str = "io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver";

/// OMB's NATS Streaming (STAN) driver class: a separate server and protocol on top of NATS,
/// deprecated by its authors (fixes ended in June 2023) in favour of JetStream.
pub const OMB_STREAMING_DRIVER_CLASS: &str =
    "io.openmessaging.benchmark.driver.natsStreaming.NatsStreamingBenchmarkDriver";

/// Why a NATS Streaming driver file is not run, and what to run instead.
pub fn streaming_refusal() -> String {
    format!(
        "`{OMB_STREAMING_DRIVER_CLASS}` is OMB's NATS Streaming (STAN) driver: NATS Streaming is its own server and protocol, deprecated by its authors (fixes ended in June 2023), and brokerbench does not speak it; running this file on JetStream instead would measure another broker under this file's name. For NATS with persistence, use OMB's JetStream driver file, driver-nats/nats.yaml (driverClass: {OMB_DRIVER_CLASS}), or leave out --driver and add --set driver=nats for brokerbench's JetStream driver on the managed nats-server"
    )
}

/// Every field of an OMB NATS driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &[
    "name",
    "driverClass",
    "natsHostUrl",
    "replicationFactor",
    "storageType",
    "maxBytes",
];

/// Translates an OMB NATS driver file into brokerbench's NATS driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let field = |field: &str, message: String| SpecError::field(file, field, message);
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("nats"));
    let mut notes = Vec::new();
    match value.get("natsHostUrl") {
        None | Some(Value::Null) => {
            notes.push("no natsHostUrl: the managed local nats-server".into())
        }
        Some(Value::String(url)) => {
            let url = if url.contains("://") {
                url.clone()
            } else {
                format!("nats://{url}")
            };
            notes.push(format!(
                "natsHostUrl={}: the run uses the server there (the managed nats-server listens on its own port, which `brokerbench broker up nats` prints: --set servers=nats://127.0.0.1:PORT runs on it)",
                brokerbench_model::redact::redact_uri(&url)
            ));
            out.insert("servers".into(), Value::from(url));
        }
        Some(_) => {
            return Err(field(
                "natsHostUrl",
                "must be host:port or nats://host:port".into(),
            ))
        }
    }
    let replicas = match value.get("replicationFactor") {
        None | Some(Value::Null) => 1,
        Some(v) => v.as_u64().filter(|n| (1..=5).contains(n)).ok_or_else(|| {
            field(
                "replicationFactor",
                format!("{v} must be a whole number from 1 to 5 (JetStream's limit)"),
            )
        })?,
    };
    out.insert("replicas".into(), Value::from(replicas));
    let storage = match value.get("storageType").and_then(Value::as_str) {
        None | Some("File") => "file",
        Some("Memory") => "memory",
        Some(other) => {
            return Err(field(
                "storageType",
                format!("`{other}` is not one of OMB's storage types: File, Memory"),
            ))
        }
    };
    out.insert("storage".into(), Value::from(storage));
    match value.get("maxBytes") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_i64() == Some(-1) => {}
        Some(v) => {
            let bytes = v.as_u64().filter(|&n| n > 0).ok_or_else(|| {
                field(
                    "maxBytes",
                    format!("{v} must be a positive number of bytes, or -1 for no limit"),
                )
            })?;
            out.insert("max_bytes".into(), Value::from(bytes));
        }
    }
    notes.insert(
        0,
        format!(
            "{file} is an OpenMessaging Benchmark NATS driver file: JetStream, {storage} storage, {replicas} replica(s)"
        ),
    );
    Ok(OmbDriver {
        map: Value::Object(out),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("n.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    #[test]
    fn an_omb_nats_driver_file_maps_onto_jetstream_settings() {
        let d = omb("name: NATS\ndriverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver\nnatsHostUrl: localhost:4222\nreplicationFactor: 3\nstorageType: Memory\nmaxBytes: 1048576\n").unwrap();
        assert_eq!(d.map["servers"], "nats://localhost:4222");
        assert_eq!(d.map["replicas"], 3);
        assert_eq!(d.map["storage"], "memory");
        assert_eq!(d.map["max_bytes"], 1048576);
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("natsHostUrl=nats://localhost:4222")),
            "{:?}",
            d.notes
        );
        let d = omb("driverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver\nnatsHostUrl: nats://u:hunter2@localhost:4222\n").unwrap();
        assert!(
            !format!("{:?}", d.notes).contains("hunter2"),
            "{:?}",
            d.notes
        );
        let e = omb("driverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver\nstorageType: Disk\n").unwrap_err().to_string();
        assert!(
            e.contains("`storageType`") && e.contains("File, Memory"),
            "{e}"
        );
        let e = omb("driverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver\nnatsHostURL: x\n").unwrap_err().to_string();
        assert!(e.contains("did you mean `natsHostUrl`"), "{e}");
    }
}
