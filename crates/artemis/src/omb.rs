//! OpenMessaging Benchmark Artemis driver files, read unchanged (`driverClass:
//! io.openmessaging.benchmark.driver.artemis.ArtemisBenchmarkDriver`): `brokerAddress` is the
//! broker (OMB's Core-protocol URL; Artemis's default acceptor on 61616 speaks STOMP too, and
//! the managed broker listens there).

use brokerbench_model::family::OmbDriver;
use brokerbench_model::omb::check_driver_keys;
use brokerbench_model::yaml::{Mapping, Value};
use brokerbench_model::SpecError;

/// OMB's Artemis driver class.
pub const OMB_DRIVER_CLASS: &str =
    "io.openmessaging.benchmark.driver.artemis.ArtemisBenchmarkDriver";

/// Every field of an OMB Artemis driver file.
pub const OMB_DRIVER_FIELDS: &[&str] = &["name", "driverClass", "brokerAddress"];

/// Translates an OMB Artemis driver file into brokerbench's Artemis driver mapping.
pub fn translate_omb_driver(file: &str, value: &Value) -> Result<OmbDriver, SpecError> {
    check_driver_keys(file, value, OMB_DRIVER_FIELDS)?;
    let mut out = Mapping::new();
    out.insert("driver".into(), Value::from("artemis"));
    let mut notes = vec![format!(
        "{file} is an OpenMessaging Benchmark Artemis driver file: a durable multicast address per topic, a durable shared queue per subscription, durable messages confirmed by the broker, each delivery acknowledged — over STOMP 1.2, where OMB's Java driver speaks Artemis's Core protocol"
    )];
    match value.get("brokerAddress") {
        None | Some(Value::Null) => {
            notes.push("no brokerAddress: the managed local Artemis".into())
        }
        Some(Value::String(url)) => {
            crate::config::ArtemisUrl::parse(url).map_err(|e| {
                SpecError::field(
                    file,
                    "brokerAddress",
                    format!("{e} (OMB's form: tcp://host:61616)"),
                )
            })?;
            notes.push(format!(
                "brokerAddress={}: the run uses the broker there (the managed Artemis listens on 61616 unless BROKERBENCH_ARTEMIS_PORT moves it: `brokerbench broker up artemis` starts it)",
                brokerbench_model::redact::redact_uri(url)
            ));
            out.insert("broker_address".into(), Value::from(url.clone()));
        }
        Some(_) => {
            return Err(SpecError::field(
                file,
                "brokerAddress",
                "must be a URL such as tcp://localhost:61616",
            ))
        }
    }
    Ok(OmbDriver {
        map: Value::Object(out),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omb(text: &str) -> Result<OmbDriver, SpecError> {
        translate_omb_driver("a.yaml", &brokerbench_model::yaml::from_str(text).unwrap())
    }

    #[test]
    fn an_omb_artemis_driver_file_names_the_broker() {
        let d = omb("name: Artemis\ndriverClass: io.openmessaging.benchmark.driver.artemis.ArtemisBenchmarkDriver\n\n# ActiveMQ Artemis client-specific configuration\nbrokerAddress: tcp://localhost:61616\n").unwrap();
        assert_eq!(d.map["driver"], "artemis");
        assert_eq!(d.map["broker_address"], "tcp://localhost:61616");
        assert!(d.notes[0].contains("STOMP"), "{:?}", d.notes);
        let e = omb("driverClass: io.openmessaging.benchmark.driver.artemis.ArtemisBenchmarkDriver\nbrokerAdress: tcp://h:1\n").unwrap_err().to_string();
        assert!(e.contains("did you mean `brokerAddress`"), "{e}");
        let e = omb("driverClass: io.openmessaging.benchmark.driver.artemis.ArtemisBenchmarkDriver\nbrokerAddress: amqp://h:1\n").unwrap_err().to_string();
        assert!(
            e.contains("`brokerAddress`") && e.contains("tcp://host:61616"),
            "{e}"
        );
        let d = omb("driverClass: io.openmessaging.benchmark.driver.artemis.ArtemisBenchmarkDriver\nbrokerAddress: tcp://u:hunter2@h:61616\n").unwrap();
        assert!(
            !format!("{:?}", d.notes).contains("hunter2"),
            "{:?}",
            d.notes
        );
    }
}
