//! Which Pulsar the managed broker runs: the release brokerbench pins, [`VERSION`], fetched
//! from Maven Central (`org.apache.pulsar:pulsar-server-distribution`, its `bin` tar.gz, 245
//! MB) by `broker install pulsar` or by the first start, checked against the SHA-256 in
//! [`RELEASE`] and unpacked into `pulsar/VERSION/` of the broker's folder.

use std::path::PathBuf;

use brokerbench_brokers::distribution::Distribution;

use super::{ManagedPulsar, NAME};

/// The Pulsar release brokerbench runs.
pub const VERSION: &str = "4.0.8";

/// The pinned release: `pulsar-server-distribution-4.0.8-bin.tar.gz` and its SHA-256 as
/// Maven Central serves it.
pub(super) const RELEASE: Distribution = Distribution {
    broker: NAME,
    title: "Apache Pulsar",
    coordinates: "org.apache.pulsar:pulsar-server-distribution",
    version: VERSION,
    classifier: "bin",
    sha256: "35c7d064c9e0928edbf2e708989faba0379662f98aa84ce0d4190c59efb6765e",
    unpacked: "apache-pulsar-4.0.8",
    installed: &[SCRIPT, "lib"],
    download: "once, 245 MB",
};

/// The script that starts the standalone broker, in the distribution.
const SCRIPT: &str = "bin/pulsar";

impl ManagedPulsar {
    /// The unpacked distribution (`bin/`, `conf/`, `lib/`).
    pub fn distribution(&self) -> PathBuf {
        RELEASE.home(&self.daemon.dir)
    }

    /// `bin/pulsar`, which starts the standalone broker.
    pub(super) fn script(&self) -> PathBuf {
        self.distribution().join(SCRIPT)
    }

    /// `bin/pulsar-perf`, Pulsar's own load generator (the bench's peer).
    pub fn perf_script(&self) -> PathBuf {
        self.distribution().join("bin/pulsar-perf")
    }
}
