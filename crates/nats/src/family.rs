//! The NATS JetStream family: driver file, driver, managed server and metrics, as one
//! registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
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

impl DriverSchema for NatsFamily {
    fn name(&self) -> &'static str {
        "nats"
    }
    fn fields(&self) -> &'static [&'static str] {
        NATS_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
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

impl Family for NatsFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "NATS"
    }
    fn about(&self) -> &'static str {
        "NATS JetStream from the nats-server release brokerbench pins (else Debian's), on loopback; any NATS server with JetStream by servers"
    }
    fn address_field(&self) -> &'static str {
        "servers"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<NatsDriverConfig>(config)?
            .servers
            .map(|url| url.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<NatsDriverConfig>(config)?;
        let mut url = managed_or_named(
            managed,
            config.servers.as_ref(),
            self.address_field(),
            NatsUrl::parse,
        )?;
        if let Some(tls) = &config.tls {
            url.tls = Some(tls.clone());
        }
        Ok(Box::new(NatsDriver::new(config, url)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedNats::new(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
