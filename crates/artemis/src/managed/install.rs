//! Which Artemis the managed broker runs: the release brokerbench pins, [`VERSION`], fetched
//! from Maven Central (`org.apache.activemq:apache-artemis`, its `bin` tar.gz) by `broker
//! install artemis` or by the first start, checked against the SHA-256 in [`RELEASE`] and
//! unpacked into `artemis/VERSION/` of the broker's folder.

use std::path::PathBuf;

use brokerbench_brokers::distribution::Distribution;

use super::{ManagedArtemis, NAME};

/// The Artemis release brokerbench runs.
pub const VERSION: &str = "2.40.0";

/// The pinned release: `apache-artemis-2.40.0-bin.tar.gz` and its SHA-256 as Maven Central
/// serves it.
pub(super) const RELEASE: Distribution = Distribution {
    broker: NAME,
    title: "ActiveMQ Artemis",
    coordinates: "org.apache.activemq:apache-artemis",
    version: VERSION,
    classifier: "bin",
    sha256: "3add67e7b0af89f81eac1e6c577427b049b4e7502fb278c591838465d5ca93b5",
    unpacked: "apache-artemis-2.40.0",
    installed: &[BOOT_JAR],
    download: "once",
};

/// The jar the broker's JVM starts from, in the distribution.
const BOOT_JAR: &str = "lib/artemis-boot.jar";

impl ManagedArtemis {
    /// The unpacked distribution (`bin/`, `lib/`).
    pub fn distribution(&self) -> PathBuf {
        RELEASE.home(&self.daemon.dir)
    }

    /// The jar the broker's JVM starts from.
    pub(super) fn boot_jar(&self) -> PathBuf {
        self.distribution().join(BOOT_JAR)
    }
}
