//! A broker distribution brokerbench pins: a `tar.gz` from Maven Central (Artemis, Pulsar),
//! fetched by Maven (its cache, mirrors and proxy settings apply), checked against the SHA-256
//! brokerbench pins and unpacked into `<broker folder>/<version>/`. An interrupted install
//! never looks complete: it fills a side folder and renames it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{process, BrokerError};

/// One pinned release.
pub struct Distribution {
    /// The broker's name on the command line (`artemis`).
    pub broker: &'static str,
    /// What it is, for messages (`ActiveMQ Artemis`).
    pub title: &'static str,
    /// Maven's `group:artifact`.
    pub coordinates: &'static str,
    pub version: &'static str,
    /// Maven's classifier of the archive (`bin`).
    pub classifier: &'static str,
    /// The SHA-256 of the archive as Maven Central serves it.
    pub sha256: &'static str,
    /// The folder the archive unpacks to (`apache-artemis-2.40.0`).
    pub unpacked: &'static str,
    /// What in that folder shows the release is all there (`lib/artemis-boot.jar`): an
    /// interrupted install never has it.
    pub installed: &'static [&'static str],
    /// What the first start says of the download (`once, 245 MB`).
    pub download: &'static str,
}

impl Distribution {
    /// The unpacked release under the broker's folder `dir`.
    pub fn home(&self, dir: &Path) -> PathBuf {
        self.version_dir(dir).join(self.unpacked)
    }

    fn version_dir(&self, dir: &Path) -> PathBuf {
        dir.join(self.version)
    }

    /// `group:artifact:version:tar.gz:classifier`.
    fn artifact(&self) -> String {
        format!(
            "{}:{}:tar.gz:{}",
            self.coordinates, self.version, self.classifier
        )
    }

    /// The archive's file name as Maven copies it.
    fn archive_name(&self) -> String {
        let artifact = self.coordinates.rsplit(':').next().unwrap_or_default();
        format!("{artifact}-{}-{}.tar.gz", self.version, self.classifier)
    }

    /// Whether the release is unpacked under the broker's folder `dir`.
    pub fn is_installed(&self, dir: &Path) -> bool {
        let home = self.home(dir);
        self.installed.iter().all(|path| home.join(path).exists())
    }

    /// Err([`BrokerError::NotInstalled`]) unless the release is there.
    pub fn check_installed(&self, dir: &Path) -> Result<(), BrokerError> {
        if self.is_installed(dir) {
            return Ok(());
        }
        Err(BrokerError::NotInstalled {
            broker: self.broker,
            dir: self.home(dir),
        })
    }

    /// Installs the release before a start when it is not there, saying so on stderr first.
    pub fn install_first(&self, dir: &Path) -> Result<(), BrokerError> {
        if self.is_installed(dir) {
            return Ok(());
        }
        eprintln!(
            "installing {} {} from Maven Central ({}) ...",
            self.title, self.version, self.download
        );
        self.install(dir)
    }

    /// Fetches, checks and unpacks the release into `dir` unless it is there; one install at
    /// a time (another waits, then finds it done).
    pub fn install(&self, dir: &Path) -> Result<(), BrokerError> {
        if self.is_installed(dir) {
            return Ok(());
        }
        let _lock = crate::managed::create_and_lock(dir)?;
        if self.is_installed(dir) {
            return Ok(());
        }
        let target = self.version_dir(dir);
        let partial = target.with_file_name(format!("{}.partial", self.version));
        if partial.exists() {
            fs::remove_dir_all(&partial).map_err(BrokerError::io("removing", &partial))?;
        }
        fs::create_dir_all(&partial).map_err(BrokerError::io("creating", &partial))?;
        let archive = self.fetch(&partial)?;
        self.check_sha256(&archive)?;
        unpack(&archive, &partial)?;
        fs::remove_file(&archive).map_err(BrokerError::io("removing", &archive))?;
        if target.exists() {
            fs::remove_dir_all(&target).map_err(BrokerError::io("removing", &target))?;
        }
        fs::rename(&partial, &target).map_err(BrokerError::io("renaming to", &target))
    }

    /// [`Self::install`], and one line saying what is installed where.
    pub fn install_said(&self, dir: &Path) -> Result<String, BrokerError> {
        self.install(dir)?;
        let home = self.home(dir);
        Ok(format!(
            "{} {} installed in {}",
            self.broker,
            self.version,
            home.display()
        ))
    }

    /// The archive from Maven Central, into `dir`.
    fn fetch(&self, dir: &Path) -> Result<PathBuf, BrokerError> {
        let mut maven = Command::new("mvn");
        maven
            .args(["-q", "-B", "-Dstyle.color=never", "dependency:copy"])
            .arg(format!("-Dartifact={}", self.artifact()))
            .arg(format!("-DoutputDirectory={}", dir.display()))
            .current_dir(dir)
            .stdin(Stdio::null());
        let output = maven
            .output()
            .map_err(|source| BrokerError::MavenNotFound {
                program: "mvn".to_string(),
                source,
            })?;
        let archive = dir.join(self.archive_name());
        if !output.status.success() || !archive.is_file() {
            let mut printed = String::from_utf8_lossy(&output.stdout).into_owned();
            printed.push_str(&String::from_utf8_lossy(&output.stderr));
            return Err(BrokerError::MavenFailed {
                broker: self.broker,
                what: format!("{} {} ({})", self.title, self.version, self.artifact()),
                status: output.status,
                output: process::last_lines(&printed, 20),
            });
        }
        Ok(archive)
    }

    /// The archive is the one brokerbench pins (`sha256sum`, from coreutils).
    fn check_sha256(&self, archive: &Path) -> Result<(), BrokerError> {
        let output = Command::new("sha256sum")
            .arg(archive)
            .stdin(Stdio::null())
            .output()
            .map_err(BrokerError::io("running sha256sum on", archive))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let sum = text.split_whitespace().next().unwrap_or("");
        if output.status.success() && sum == self.sha256 {
            return Ok(());
        }
        let what = if output.status.success() {
            format!(
                "it is {sum}, not the {} brokerbench pins for {} {}: Maven's copy in ~/.m2/repository/{}/{}/ (or a mirror in ~/.m2/settings.xml) serves another file; remove that folder and run `brokerbench broker install {}` again",
                self.sha256,
                self.title,
                self.version,
                self.coordinates.replace([':', '.'], "/"),
                self.version,
                self.broker
            )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maven_names_the_archive_as_brokerbench_expects() {
        let artemis = Distribution {
            broker: "artemis",
            title: "ActiveMQ Artemis",
            coordinates: "org.apache.activemq:apache-artemis",
            version: "2.40.0",
            classifier: "bin",
            sha256: "",
            unpacked: "apache-artemis-2.40.0",
            installed: &["lib/artemis-boot.jar"],
            download: "once",
        };
        assert_eq!(
            artemis.artifact(),
            "org.apache.activemq:apache-artemis:2.40.0:tar.gz:bin"
        );
        assert_eq!(artemis.archive_name(), "apache-artemis-2.40.0-bin.tar.gz");
        assert_eq!(
            artemis.home(Path::new("/h/artemis")),
            Path::new("/h/artemis/2.40.0/apache-artemis-2.40.0")
        );
    }

    #[test]
    fn a_release_is_installed_once_all_its_marks_are_there() {
        let dir = std::env::temp_dir().join(format!("bb-distribution-{}", std::process::id()));
        let pulsar = Distribution {
            broker: "pulsar",
            title: "Apache Pulsar",
            coordinates: "org.apache.pulsar:pulsar-server-distribution",
            version: "4.0.8",
            classifier: "bin",
            sha256: "",
            unpacked: "apache-pulsar-4.0.8",
            installed: &["bin/pulsar", "lib"],
            download: "once, 245 MB",
        };
        let home = pulsar.home(&dir);
        fs::create_dir_all(home.join("bin")).unwrap();
        fs::write(home.join("bin/pulsar"), "").unwrap();
        let error = pulsar.check_installed(&dir).unwrap_err();
        assert!(
            matches!(&error, BrokerError::NotInstalled { broker: "pulsar", dir } if *dir == home),
            "{error:?}"
        );
        fs::create_dir(home.join("lib")).unwrap();
        assert!(pulsar.is_installed(&dir));
        pulsar.check_installed(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
