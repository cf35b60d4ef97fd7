//! A family written once: what it is called, its driver file's type and checks, how the
//! broker's address is read and shown, and the driver, managed broker and metrics it brings.
//! [`Declared`] answers both the driver-file loader ([`DriverSchema`]) and the registry
//! ([`Family`]) from it, so a family's crate writes neither.

use std::marker::PhantomData;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{no_omb_driver, parse_driver, resolved, OmbDriver};
use brokerbench_model::workload::{FieldError, Workload};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::entry::{config_of, managed_or_named, Family};

/// Everything a broker family is, as its crate declares it.
pub trait Declaration: 'static {
    /// Its driver file, as the crate reads it (credentials redacted when serialized).
    type Config: DeserializeOwned + Serialize;
    /// A broker's address as the driver file names it; Display shows it without credentials.
    type Address: Clone + std::fmt::Display;

    /// `driver: NAME`, `brokerbench broker up NAME`.
    const NAME: &'static str;
    /// The broker's name in prose, e.g. `RabbitMQ`.
    const TITLE: &'static str;
    /// One line for `--help`: which broker, and how brokerbench manages it.
    const ABOUT: &'static str;
    /// Where `brokerbench broker install NAME` gets the broker and what that needs.
    const INSTALLED_FROM: &'static str;
    /// The driver-file field that names a broker to use instead of the managed one.
    const ADDRESS_FIELD: &'static str;
    /// Every top-level field of its driver files, `driver` included.
    const FIELDS: &'static [&'static str];
    /// The built-in driver file: the managed local broker with default settings.
    const BUILTIN_DRIVER: &'static str;
    /// The OpenMessaging Benchmark driver classes whose files it reads unchanged.
    const OMB_CLASSES: &'static [&'static str] = &[];
    /// Every top-level field of such an OMB driver file.
    const OMB_FIELDS: &'static [&'static str] = &[];

    /// Checks of the driver file past its types; errors name `file`.
    fn validate(file: &str, config: &Self::Config) -> Result<(), SpecError> {
        let _ = (file, config);
        Ok(())
    }
    /// The driver file with its defaults filled in: what the manifest shows and the driver
    /// gets.
    fn resolve(config: Self::Config) -> Self::Config {
        config
    }
    /// Workload settings this family cannot honour, named with the fix.
    fn check_workload(workload: &Workload) -> Result<(), FieldError> {
        let _ = workload;
        Ok(())
    }
    /// Translates an OMB driver file of one of [`Self::OMB_CLASSES`] into a driver mapping.
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        let _ = map;
        Err(no_omb_driver(Self::NAME, file))
    }
    /// Why an OMB driver class it knows of but does not read is refused, with what to use.
    fn omb_refusal(class: &str) -> Option<String> {
        let _ = class;
        None
    }

    /// The broker the driver file names; None means the managed one.
    fn named(config: &Self::Config) -> Option<&Self::Address>;
    /// An address as a manifest and the terminal show it, credentials removed: its Display.
    fn shown(address: &Self::Address) -> String {
        address.to_string()
    }
    /// Reads the managed broker's address.
    fn parse(address: &str) -> Result<Self::Address, String>;
    /// The part of the managed broker's address a driver connects to (a cluster's lists every
    /// node; `driver` is given the whole).
    fn first(managed: &str) -> &str {
        managed
    }
    /// The driver for a run against `address`; `managed` is the managed broker's whole
    /// address when the run uses it.
    fn driver(
        config: Self::Config,
        address: Self::Address,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError>;
    /// The managed local broker, its files under `home`.
    fn managed(home: &Path) -> Box<dyn ManagedBroker>;
    /// What the broker's metrics endpoint serves and what it means, if it has one.
    fn metrics() -> Option<&'static MetricSet> {
        None
    }
}

/// The registry entry and driver-file schema of a declared family.
pub struct Declared<D>(PhantomData<fn() -> D>);

impl<D> Declared<D> {
    pub const fn new() -> Self {
        Declared(PhantomData)
    }
}

impl<D> Default for Declared<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Declaration> DriverSchema for Declared<D> {
    fn name(&self) -> &'static str {
        D::NAME
    }
    fn fields(&self) -> &'static [&'static str] {
        D::FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        D::BUILTIN_DRIVER
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: D::Config = parse_driver(file, map)?;
        D::validate(file, &config)?;
        Ok(resolved(D::NAME, &D::resolve(config)))
    }
    fn check_workload(&self, workload: &Workload) -> Result<(), FieldError> {
        D::check_workload(workload)
    }
    fn omb_driver_classes(&self) -> &'static [&'static str] {
        D::OMB_CLASSES
    }
    fn omb_driver_refusal(&self, class: &str) -> Option<String> {
        D::omb_refusal(class)
    }
    fn omb_driver_fields(&self) -> &'static [&'static str] {
        D::OMB_FIELDS
    }
    fn translate_omb_driver(&self, file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        D::translate_omb(file, map)
    }
}

impl<D: Declaration> Family for Declared<D> {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        D::TITLE
    }
    fn about(&self) -> &'static str {
        D::ABOUT
    }
    fn installed_from(&self) -> Option<&'static str> {
        Some(D::INSTALLED_FROM)
    }
    fn address_field(&self) -> &'static str {
        D::ADDRESS_FIELD
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(D::named(&config_of::<D::Config>(config)?).map(D::shown))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<D::Config>(config)?;
        let address = managed_or_named(
            managed.map(D::first),
            D::named(&config),
            D::ADDRESS_FIELD,
            D::parse,
        )?;
        D::driver(D::resolve(config), address, managed)
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        D::managed(home)
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        D::metrics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brokerbench_model::load_specs;

    #[derive(serde::Deserialize, serde::Serialize)]
    #[serde(deny_unknown_fields)]
    struct ToyConfig {
        #[serde(default)]
        url: Option<String>,
        #[serde(default)]
        size: u32,
    }

    /// A family of tests: its driver is an error that tells what it was given.
    struct Toy;

    impl Declaration for Toy {
        type Config = ToyConfig;
        type Address = String;
        const NAME: &'static str = "toy";
        const TITLE: &'static str = "Toy";
        const ABOUT: &'static str = "a family of tests";
        const INSTALLED_FROM: &'static str = "nowhere";
        const ADDRESS_FIELD: &'static str = "url";
        const FIELDS: &'static [&'static str] = &["driver", "url", "size"];
        const BUILTIN_DRIVER: &'static str = "driver: toy\n";

        fn validate(file: &str, config: &ToyConfig) -> Result<(), SpecError> {
            match config.size {
                0..=9 => Ok(()),
                _ => Err(SpecError::Field {
                    file: file.into(),
                    field: "size".into(),
                    message: "at most 9".into(),
                }),
            }
        }
        fn resolve(mut config: ToyConfig) -> ToyConfig {
            config.size = config.size.max(4);
            config
        }
        fn named(config: &ToyConfig) -> Option<&String> {
            config.url.as_ref()
        }
        fn shown(url: &String) -> String {
            format!("shown {url}")
        }
        fn parse(address: &str) -> Result<String, String> {
            match address {
                "" => Err("empty".into()),
                _ => Ok(address.into()),
            }
        }
        fn first(managed: &str) -> &str {
            managed.split(',').next().unwrap_or(managed)
        }
        fn driver(
            config: ToyConfig,
            address: String,
            managed: Option<&str>,
        ) -> Result<Box<dyn Driver>, DriverError> {
            let given = format!("{address} {managed:?} size {}", config.size);
            Err(DriverError::Other(given))
        }
        fn managed(_home: &Path) -> Box<dyn ManagedBroker> {
            unreachable!("no test asks for the managed broker")
        }
    }

    static TOY: Declared<Toy> = Declared::new();

    fn loaded(sets: &[&str]) -> Result<DriverConfig, SpecError> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load_specs(&[&TOY], None, None, &sets).map(|specs| specs.driver)
    }

    /// What the toy driver was given, for a run on `managed` (None: the named broker).
    fn given(config: &DriverConfig, managed: Option<&str>) -> String {
        match TOY.driver(config, managed) {
            Err(error) => error.to_string(),
            Ok(_) => unreachable!("the toy driver is never built"),
        }
    }

    #[test]
    fn the_driver_file_is_checked_and_resolved_as_declared() {
        assert_eq!(
            (Family::name(&TOY), TOY.title(), TOY.address_field()),
            ("toy", "Toy", "url")
        );
        assert_eq!(loaded(&[]).unwrap().redacted()["size"], 4);
        assert_eq!(loaded(&["size=7"]).unwrap().redacted()["size"], 7);
        let refused = loaded(&["size=10"]).unwrap_err().to_string();
        assert!(refused.contains("`size`: at most 9"), "{refused}");
        let omb = TOY
            .translate_omb_driver("omb.yaml", &Value::Null)
            .unwrap_err();
        assert!(omb
            .to_string()
            .contains("the toy family reads no OMB driver files"));
    }

    #[test]
    fn a_named_broker_is_shown_and_used_else_the_managed_ones_first_address() {
        let named = loaded(&["url=b1:1"]).unwrap();
        assert_eq!(TOY.address(&named).unwrap().as_deref(), Some("shown b1:1"));
        assert_eq!(given(&named, None), "b1:1 None size 4");
        let managed = loaded(&[]).unwrap();
        assert_eq!(TOY.address(&managed).unwrap(), None);
        assert_eq!(given(&managed, Some("n1,n2")), "n1 Some(\"n1,n2\") size 4");
        assert_eq!(given(&managed, None), "no url and no managed broker");
        assert_eq!(
            given(&managed, Some("")),
            "the managed broker's address: empty"
        );
    }
}
