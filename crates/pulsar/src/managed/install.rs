//! Which Pulsar the managed broker runs: the release brokerbench pins, [`VERSION`], fetched
//! from Maven Central (`org.apache.pulsar:pulsar-server-distribution`, its `bin` tar.gz, 245
//! MB) by `broker install pulsar` or by the first start, checked against the SHA-256 in
//! [`RELEASE`] and unpacked into `pulsar/VERSION/` of the broker's folder.

use std::path::PathBuf;

use brokerbench_brokers::distribution::Distribution;
use brokerbench_brokers::BrokerError;

use super::{ManagedPulsar, NAME};

/// The Pulsar release brokerbench runs.
pub const VERSION: &str = "4.0.8";

/// The pinned release: `pulsar-server-distribution-4.0.8-bin.tar.gz` and its SHA-256 as
/// Maven Central serves it.
const RELEASE: Distribution = Distribution {
    broker: NAME,
    title: "Apache Pulsar",
    coordinates: "org.apache.pulsar:pulsar-server-distribution",
    version: VERSION,
    classifier: "bin",
    sha256: "35c7d064c9e0928edbf2e708989faba0379662f98aa84ce0d4190c59efb6765e",
    unpacked: "apache-pulsar-4.0.8",
};

impl ManagedPulsar {
    /// The unpacked distribution (`bin/`, `conf/`, `lib/`).
    pub fn distribution(&self) -> PathBuf {
        RELEASE.home(&self.daemon.dir)
    }

    pub fn is_installed(&self) -> bool {
        self.script().is_file() && self.distribution().join("lib").is_dir()
    }

    /// `bin/pulsar`, which starts the standalone broker.
    pub(super) fn script(&self) -> PathBuf {
        self.distribution().join("bin/pulsar")
    }

    /// `bin/pulsar-perf`, Pulsar's own load generator (the bench's peer).
    pub fn perf_script(&self) -> PathBuf {
        self.distribution().join("bin/pulsar-perf")
    }

    /// Fetches, checks and unpacks the pinned release unless it is there; one line saying
    /// what is installed where.
    pub fn install_pinned(&self) -> Result<String, BrokerError> {
        RELEASE.install_said(&self.daemon.dir, || self.is_installed())
    }
}
