//! Which Artemis the managed broker runs: the release brokerbench pins, [`VERSION`], fetched
//! from Maven Central (`org.apache.activemq:apache-artemis`, its `bin` tar.gz) by `broker
//! install artemis` or by the first start, checked against [`SHA256`] and unpacked into
//! `artemis/VERSION/` of the broker's folder.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use brokerbench_brokers::{process, BrokerError};

use super::{ManagedArtemis, NAME};

/// The Artemis release brokerbench runs.
pub const VERSION: &str = "2.40.0";

/// The SHA-256 of `apache-artemis-2.40.0-bin.tar.gz` as Maven Central serves it.
const SHA256: &str = "3add67e7b0af89f81eac1e6c577427b049b4e7502fb278c591838465d5ca93b5";

/// Maven's coordinates of the distribution.
fn artifact() -> String {
    format!("org.apache.activemq:apache-artemis:{VERSION}:tar.gz:bin")
}

impl ManagedArtemis {
    /// The unpacked distribution (`bin/`, `lib/`).
    pub fn distribution(&self) -> PathBuf {
        self.version_dir().join(format!("apache-artemis-{VERSION}"))
    }

    fn version_dir(&self) -> PathBuf {
        self.daemon.dir.join(VERSION)
    }

    pub fn is_installed(&self) -> bool {
        self.boot_jar().is_file()
    }

    /// The jar the broker's JVM starts from.
    pub(super) fn boot_jar(&self) -> PathBuf {
        self.distribution().join("lib/artemis-boot.jar")
    }

    /// Fetches, checks and unpacks the pinned release unless it is there; one line saying
    /// what is installed where.
    pub fn install_pinned(&self) -> Result<String, BrokerError> {
        if !self.is_installed() {
            // One install at a time: another `broker up` waits, then finds it done.
            let _lock = brokerbench_brokers::managed::create_and_lock(&self.daemon.dir)?;
            if !self.is_installed() {
                self.fetch_and_unpack()?;
            }
        }
        Ok(format!(
            "artemis {VERSION} installed in {}",
            self.distribution().display()
        ))
    }

    /// Fills a side folder and renames it: an interrupted install never looks complete.
    fn fetch_and_unpack(&self) -> Result<(), BrokerError> {
        let dir = self.version_dir();
        let partial = dir.with_file_name(format!("{VERSION}.partial"));
        if partial.exists() {
            fs::remove_dir_all(&partial).map_err(BrokerError::io("removing", &partial))?;
        }
        fs::create_dir_all(&partial).map_err(BrokerError::io("creating", &partial))?;
        let archive = fetch(&partial)?;
        check_sha256(&archive)?;
        unpack(&archive, &partial)?;
        fs::remove_file(&archive).map_err(BrokerError::io("removing", &archive))?;
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(BrokerError::io("removing", &dir))?;
        }
        fs::rename(&partial, &dir).map_err(BrokerError::io("renaming to", &dir))
    }
}

/// The distribution's tar.gz from Maven Central, into `dir`.
fn fetch(dir: &Path) -> Result<PathBuf, BrokerError> {
    let mut maven = Command::new("mvn");
    maven
        .args(["-q", "-B", "-Dstyle.color=never", "dependency:copy"])
        .arg(format!("-Dartifact={}", artifact()))
        .arg(format!("-DoutputDirectory={}", dir.display()))
        .current_dir(dir)
        .stdin(Stdio::null());
    let output = maven
        .output()
        .map_err(|source| BrokerError::MavenNotFound {
            program: "mvn".to_string(),
            source,
        })?;
    let archive = dir.join(format!("apache-artemis-{VERSION}-bin.tar.gz"));
    if !output.status.success() || !archive.is_file() {
        let mut printed = String::from_utf8_lossy(&output.stdout).into_owned();
        printed.push_str(&String::from_utf8_lossy(&output.stderr));
        return Err(BrokerError::MavenFailed {
            broker: NAME,
            what: format!("ActiveMQ Artemis {VERSION} ({})", artifact()),
            status: output.status,
            output: process::last_lines(&printed, 20),
        });
    }
    Ok(archive)
}

/// The archive is the one brokerbench pins (`sha256sum`, from coreutils).
fn check_sha256(archive: &Path) -> Result<(), BrokerError> {
    let output = Command::new("sha256sum")
        .arg(archive)
        .stdin(Stdio::null())
        .output()
        .map_err(BrokerError::io("running sha256sum on", archive))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let sum = text.split_whitespace().next().unwrap_or("");
    if output.status.success() && sum == SHA256 {
        return Ok(());
    }
    let what = if output.status.success() {
        format!("it is {sum}, not the {SHA256} brokerbench pins for Artemis {VERSION}: Maven's copy in ~/.m2/repository/org/apache/activemq/apache-artemis/{VERSION}/ (or a mirror in ~/.m2/settings.xml) serves another file; remove that folder and run `brokerbench broker install artemis` again")
    } else {
        format!(
            "sha256sum failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
    };
    Err(BrokerError::Io {
        action: "checking the SHA-256 of",
        path: archive.to_path_buf(),
        source: std::io::Error::other(what),
    })
}

/// Unpacks `archive` into `dir` with the system's tar.
fn unpack(archive: &Path, dir: &Path) -> Result<(), BrokerError> {
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .stdin(Stdio::null())
        .status()
        .map_err(BrokerError::io("unpacking", archive))?;
    if status.success() {
        return Ok(());
    }
    Err(BrokerError::CommandFailed {
        what: format!("unpacking {}", archive.display()),
        status,
        log_file: archive.to_path_buf(),
        log_tail: String::new(),
    })
}
