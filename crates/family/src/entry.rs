//! The registry entry of a broker family, and the registry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_metrics::MetricSet;
use brokerbench_model::{DriverConfig, DriverSchema};

use brokerbench_driver::{Driver, DriverError};

/// One broker family.
pub trait Family: Sync {
    /// Its driver-file schema: name, fields, built-in driver file, validation.
    fn schema(&self) -> &dyn DriverSchema;
    /// The family's name, `driver: NAME` and `brokerbench broker up NAME`.
    fn name(&self) -> &'static str {
        self.schema().name()
    }
    /// The broker's name in prose, e.g. `RabbitMQ`.
    fn title(&self) -> &'static str;
    /// One line for `--help`: which broker, and how brokerbench manages it.
    fn about(&self) -> &'static str;
    /// Where `brokerbench broker install NAME` gets the broker and what that needs, for
    /// `--help`; None: there is nothing to install.
    fn installed_from(&self) -> Option<&'static str> {
        None
    }
    /// The driver-file field that names a broker to use instead of the managed one.
    fn address_field(&self) -> &'static str;
    /// The broker address the driver file names, credentials removed; None means: use the
    /// managed local broker.
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError>;
    /// Builds the driver for a run; `managed` is the managed broker's client address when the
    /// driver file names none.
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError>;
    /// The managed local broker, its files under `home`.
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker>;
    /// What the broker's metrics endpoint serves and what it means, if it has one.
    fn metrics(&self) -> Option<&'static MetricSet> {
        None
    }
}

/// The families a build knows, in the order `--help` lists them; the first is the default.
#[derive(Clone, Copy)]
pub struct Registry(pub &'static [&'static dyn Family]);

impl Registry {
    /// The family `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&'static dyn Family> {
        self.0.iter().copied().find(|f| f.name() == name)
    }

    /// Every family's name.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|f| f.name()).collect()
    }

    /// Every family's schema, for loading driver files.
    pub fn schemas(&self) -> Vec<&'static dyn DriverSchema> {
        self.0.iter().map(|f| f.schema()).collect()
    }
}

/// A family's config type from a driver file its schema has accepted (a failure here is a
/// bug: the schema let through what the type refuses).
pub fn config_of<T: serde::de::DeserializeOwned>(config: &DriverConfig) -> Result<T, DriverError> {
    config
        .parse()
        .map_err(|e| DriverError::Other(e.to_string()))
}

/// The broker a run connects to: the managed broker's address when the run uses it, else the
/// one the driver file names (in its field `field`). `parse` reads the managed address.
pub fn managed_or_named<T: Clone>(
    managed: Option<&str>,
    named: Option<&T>,
    field: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, DriverError> {
    match (managed, named) {
        (Some(address), _) => parse(address)
            .map_err(|e| DriverError::Other(format!("the managed broker's address: {e}"))),
        (None, Some(named)) => Ok(named.clone()),
        (None, None) => Err(DriverError::Other(format!(
            "no {field} and no managed broker"
        ))),
    }
}
