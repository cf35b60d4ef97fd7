//! The Redis Streams family: driver file, driver and managed server, as one registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::SpecError;

use crate::config::{RedisDriverConfig, RedisUrl, REDIS_DRIVER_FIELDS};
use crate::RedisDriver;

/// Redis Streams through brokerbench's own RESP client.
pub struct RedisFamily;

/// The registry entry.
pub static FAMILY: Declared<RedisFamily> = Declared::new();

impl Declaration for RedisFamily {
    type Config = RedisDriverConfig;
    type Address = RedisUrl;
    const NAME: &'static str = "redis";
    const TITLE: &'static str = "Redis Streams";
    const ABOUT: &'static str = "Debian's redis-server, its own server on loopback (append-only file, fsync every second); any Redis 5+ by redis_url";
    const INSTALLED_FROM: &'static str = "Debian's redis-server package with apt-get";
    const ADDRESS_FIELD: &'static str = "redis_url";
    const FIELDS: &'static [&'static str] = REDIS_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] = &[crate::omb::OMB_DRIVER_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &RedisDriverConfig) -> Result<(), SpecError> {
        config.validate().map_err(|e| field_error(file, e))
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn named(config: &RedisDriverConfig) -> Option<&RedisUrl> {
        config.redis_url.as_ref()
    }
    fn parse(address: &str) -> Result<RedisUrl, String> {
        RedisUrl::parse(address)
    }
    fn driver(
        config: RedisDriverConfig,
        url: RedisUrl,
        _managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        Ok(Box::new(RedisDriver::new(config, url)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(crate::managed::managed(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
