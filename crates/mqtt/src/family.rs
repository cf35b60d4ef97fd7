//! The MQTT family: driver file, driver and managed broker, as one registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, parse_driver, resolved, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{MqttDriverConfig, MQTT_DRIVER_FIELDS};
use crate::url::MqttUrl;
use crate::MqttDriver;

/// MQTT through brokerbench's own client.
pub struct MqttFamily;

/// The registry entry.
pub static FAMILY: MqttFamily = MqttFamily;

impl DriverSchema for MqttFamily {
    fn name(&self) -> &'static str {
        "mqtt"
    }
    fn fields(&self) -> &'static [&'static str] {
        MQTT_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: MqttDriverConfig = parse_driver(file, map)?;
        config.validate().map_err(|e| field_error(file, e))?;
        Ok(resolved("mqtt", &config))
    }
    fn omb_driver_classes(&self) -> &'static [&'static str] {
        &[crate::omb::OMB_V3_CLASS, crate::omb::OMB_V5_CLASS]
    }
    fn omb_driver_fields(&self) -> &'static [&'static str] {
        crate::omb::OMB_DRIVER_FIELDS
    }
    fn translate_omb_driver(&self, file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
}

impl Family for MqttFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "MQTT"
    }
    fn about(&self) -> &'static str {
        "Debian's mosquitto, its own broker on loopback (QoS 1, MQTT 5); any MQTT 3.1.1 or 5 broker by mqtt_url"
    }
    fn address_field(&self) -> &'static str {
        "mqtt_url"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<MqttDriverConfig>(config)?
            .mqtt_url
            .map(|url| url.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<MqttDriverConfig>(config)?;
        let url = managed_or_named(
            managed,
            config.mqtt_url.as_ref(),
            self.address_field(),
            MqttUrl::parse,
        )?;
        Ok(Box::new(MqttDriver::new(config, url)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(crate::managed::managed(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
