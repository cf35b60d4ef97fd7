//! The NATS JetStream family: driver file, driver, managed server and metrics, as one
//! registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::{counter, gauge, Format, MetricSet, MetricSpec, MESSAGES_IN};
use brokerbench_model::family::{field_error, parse_driver, resolved, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{NatsDriverConfig, NatsUrl, NATS_DRIVER_FIELDS};
use crate::managed::ManagedNats;
use crate::NatsDriver;

/// NATS JetStream through brokerbench's own NATS client.
pub struct NatsFamily;

/// The registry entry.
pub static FAMILY: NatsFamily = NatsFamily;

const fn json(spec: MetricSpec) -> MetricSpec {
    MetricSpec {
        without_label: None,
        ..spec
    }
}

/// From the monitoring endpoints: `/varz` (server) and `/jsz?streams=true` (JetStream). The
/// count compared with brokerbench's is the sum of the streams' last sequence numbers: every
/// message a stream stored, whatever its limits later discarded.
const NATS_SPECS: &[MetricSpec] = &[
    MetricSpec {
        absent_is_zero: true,
        ..json(counter(
            MESSAGES_IN,
            "jsz.account_details.stream_detail.state.last_seq",
            None,
        ))
    },
    json(counter(
        "server_messages_in_per_second",
        "varz.in_msgs",
        None,
    )),
    json(counter(
        "server_messages_out_per_second",
        "varz.out_msgs",
        None,
    )),
    json(counter("server_bytes_in_per_second", "varz.in_bytes", None)),
    json(gauge("stream_messages", "jsz.messages", None, 1.0)),
    json(gauge("stream_bytes", "jsz.bytes", None, 1.0)),
    json(gauge("jetstream_memory_bytes", "jsz.memory", None, 1.0)),
    json(gauge("jetstream_storage_bytes", "jsz.storage", None, 1.0)),
    json(gauge("resident_memory_bytes", "varz.mem", None, 1.0)),
    json(gauge("slow_consumers", "varz.slow_consumers", None, 1.0)),
];

static NATS_METRICS: MetricSet = MetricSet {
    source: "nats",
    format: Format::Json {
        paths: &["/varz", "/jsz?accounts=true&streams=true"],
    },
    specs: NATS_SPECS,
};

impl DriverSchema for NatsFamily {
    fn name(&self) -> &'static str {
        "nats"
    }
    fn fields(&self) -> &'static [&'static str] {
        NATS_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../../../workloads/drivers/nats.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: NatsDriverConfig = parse_driver(file, map)?;
        config.validate().map_err(|e| field_error(file, e))?;
        Ok(resolved("nats", &config))
    }
    fn omb_driver_classes(&self) -> &'static [&'static str] {
        &[crate::omb::OMB_DRIVER_CLASS]
    }
    fn omb_driver_refusal(&self, class: &str) -> Option<String> {
        (class == crate::omb::OMB_STREAMING_DRIVER_CLASS).then(crate::omb::streaming_refusal)
    }
    fn omb_driver_fields(&self) -> &'static [&'static str] {
        crate::omb::OMB_DRIVER_FIELDS
    }
    fn translate_omb_driver(&self, file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
}

fn config_of(config: &DriverConfig) -> Result<NatsDriverConfig, DriverError> {
    brokerbench_driver::family::config_of(config)
}

impl Family for NatsFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "NATS"
    }
    fn about(&self) -> &'static str {
        "NATS JetStream from Debian's nats-server package, on loopback; any NATS server with JetStream by servers"
    }
    fn address_field(&self) -> &'static str {
        "servers"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of(config)?.servers.map(|url| url.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of(config)?;
        let mut url = match (managed, &config.servers) {
            (Some(url), _) => NatsUrl::parse(url).map_err(DriverError::Other)?,
            (None, Some(url)) => url.clone(),
            (None, None) => {
                return Err(DriverError::Other(
                    "no servers and no managed broker".into(),
                ))
            }
        };
        if let Some(tls) = &config.tls {
            url.tls = Some(tls.clone());
        }
        Ok(Box::new(NatsDriver::new(config, url)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedNats::new(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&NATS_METRICS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_key_follows_the_naming_scheme() {
        for spec in NATS_SPECS {
            assert!(
                brokerbench_metrics::follows_naming(spec.key),
                "{}",
                spec.key
            );
        }
    }
}
