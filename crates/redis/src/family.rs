//! The Redis Streams family: driver file, driver and managed server, as one registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, parse_driver, resolved, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{RedisDriverConfig, RedisUrl, REDIS_DRIVER_FIELDS};
use crate::RedisDriver;

/// Redis Streams through brokerbench's own RESP client.
pub struct RedisFamily;

/// The registry entry.
pub static FAMILY: RedisFamily = RedisFamily;

impl DriverSchema for RedisFamily {
    fn name(&self) -> &'static str {
        "redis"
    }
    fn fields(&self) -> &'static [&'static str] {
        REDIS_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: RedisDriverConfig = parse_driver(file, map)?;
        config.validate().map_err(|e| field_error(file, e))?;
        Ok(resolved("redis", &config))
    }
    fn omb_driver_classes(&self) -> &'static [&'static str] {
        &[crate::omb::OMB_DRIVER_CLASS]
    }
    fn omb_driver_fields(&self) -> &'static [&'static str] {
        crate::omb::OMB_DRIVER_FIELDS
    }
    fn translate_omb_driver(&self, file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
}

impl Family for RedisFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "Redis Streams"
    }
    fn about(&self) -> &'static str {
        "Debian's redis-server, its own server on loopback (append-only file, fsync every second); any Redis 5+ by redis_url"
    }
    fn address_field(&self) -> &'static str {
        "redis_url"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<RedisDriverConfig>(config)?
            .redis_url
            .map(|url| url.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<RedisDriverConfig>(config)?;
        let url = managed_or_named(
            managed,
            config.redis_url.as_ref(),
            self.address_field(),
            RedisUrl::parse,
        )?;
        Ok(Box::new(RedisDriver::new(config, url)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(crate::managed::managed(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
