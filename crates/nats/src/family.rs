//! The NATS JetStream family: driver file, driver, managed server and metrics, as one
//! registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::SpecError;

use crate::config::{NatsDriverConfig, NatsUrl, NATS_DRIVER_FIELDS};
use crate::managed::ManagedNats;
use crate::NatsDriver;

/// NATS JetStream through brokerbench's own NATS client.
pub struct NatsFamily;

/// The registry entry.
pub static FAMILY: Declared<NatsFamily> = Declared::new();

impl Declaration for NatsFamily {
    type Config = NatsDriverConfig;
    type Address = NatsUrl;
    const NAME: &'static str = "nats";
    const TITLE: &'static str = "NATS";
    const ABOUT: &'static str = "NATS JetStream from the nats-server release brokerbench pins (else Debian's), on loopback; any NATS server with JetStream by servers";
    const INSTALLED_FROM: &'static str =
        "the nats-server release brokerbench pins, from PyPI with pip";
    const ADDRESS_FIELD: &'static str = "servers";
    const FIELDS: &'static [&'static str] = NATS_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] = &[crate::omb::OMB_DRIVER_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &NatsDriverConfig) -> Result<(), SpecError> {
        config.validate().map_err(|e| field_error(file, e))
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn omb_refusal(class: &str) -> Option<String> {
        (class == crate::omb::OMB_STREAMING_DRIVER_CLASS).then(crate::omb::streaming_refusal)
    }
    fn named(config: &NatsDriverConfig) -> Option<&NatsUrl> {
        config.servers.as_ref()
    }
    fn parse(address: &str) -> Result<NatsUrl, String> {
        NatsUrl::parse(address)
    }
    /// The driver file's `tls:` block turns TLS on for a `nats://` URL too.
    fn driver(
        config: NatsDriverConfig,
        mut url: NatsUrl,
        _managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        if let Some(tls) = &config.tls {
            url.tls = Some(tls.clone());
        }
        Ok(Box::new(NatsDriver::new(config, url)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedNats::new(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
