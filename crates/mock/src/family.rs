//! The mock as one registry entry: its driver file and driver; it has no broker to manage.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::mock::MockDriver;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{config_of, Family};
use brokerbench_model::family::{field_error, parse_driver, resolved};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{MockDriverConfig, MOCK_DRIVER_FIELDS};
use crate::managed::{NoBroker, ADDRESS};

/// In-memory queues in brokerbench's own process.
pub struct MockFamily;

/// The registry entry.
pub static FAMILY: MockFamily = MockFamily;

impl DriverSchema for MockFamily {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn fields(&self) -> &'static [&'static str] {
        MOCK_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: MockDriverConfig = parse_driver(file, map)?;
        config.faults().map_err(|e| field_error(file, e))?;
        Ok(resolved("mock", &config))
    }
}

impl Family for MockFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "the in-memory mock"
    }
    fn about(&self) -> &'static str {
        "no broker: in-memory queues inside brokerbench's own process, with faults on request; for testing brokerbench and measuring its own ceiling"
    }
    fn address_field(&self) -> &'static str {
        "driver"
    }
    /// Never the managed broker: there is none.
    fn address(&self, _config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(Some(ADDRESS.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        _managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<MockDriverConfig>(config)?;
        let faults = config
            .faults()
            .map_err(|e| DriverError::Other(format!("{}: {}", e.field, e.message)))?;
        Ok(Box::new(MockDriver::new(faults, 1)))
    }
    fn managed(&self, _home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(NoBroker)
    }
}
