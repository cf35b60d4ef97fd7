//! A family's Debian package, installed where it is first needed: by `broker install NAME` or
//! by the first `broker up NAME` (a managed run's start included), with apt-get as root or
//! through sudo without a password prompt. What it installs is said on standard error before
//! apt-get starts. The system service a package starts on installation is stopped and
//! disabled: the managed broker runs a process of its own, on the same port.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::{process, BrokerError};

/// A family's broker as Debian packages it.
#[derive(Debug, Clone, Copy)]
pub struct DebianPackage {
    /// The family's name, e.g. `redis`.
    pub broker: &'static str,
    /// The package that has the program, e.g. `redis-server`.
    pub package: &'static str,
    /// Further packages installed beside it (`redis-tools`: redis-cli).
    pub with: &'static [&'static str],
    /// The system service the package starts when systemd runs, stopped and disabled.
    pub service: Option<&'static str>,
}

/// How long apt-get waits for another apt-get or dpkg to let go of the package lock.
const LOCK_TIMEOUT_S: u32 = 600;

/// The program `find` looks for, installing `package` first when `find` finds none. The
/// error when it cannot be had says what to run by hand.
pub fn ensure(
    package: &DebianPackage,
    find: impl Fn() -> Option<PathBuf>,
) -> Result<PathBuf, BrokerError> {
    if let Some(program) = find() {
        return Ok(program);
    }
    install(package)?;
    find().ok_or_else(|| {
        cannot(
            package,
            "apt-get installed it, yet its program is not there",
        )
    })
}

/// Installs `package` (and what goes with it) with apt-get; a no-op when dpkg has it already.
pub fn install(package: &DebianPackage) -> Result<(), BrokerError> {
    let missing: Vec<&str> = std::iter::once(package.package)
        .chain(package.with.iter().copied())
        .filter(|name| !installed(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let runner = runner(package)?;
    eprintln!(
        "{}: installing Debian's {} with apt-get (first use; `brokerbench broker install {}` does it ahead of a run)",
        package.broker,
        missing.join(", "),
        package.broker
    );
    if apt_get(&runner, "install", &missing).is_err() {
        // A fresh machine may have no package lists yet, or stale ones.
        apt_get(&runner, "update", &[]).map_err(|said| cannot(package, &said))?;
        apt_get(&runner, "install", &missing).map_err(|said| cannot(package, &said))?;
    }
    if let Some(service) = package.service {
        stop_service(&runner, service);
    }
    Ok(())
}

/// Whether dpkg has `name` installed.
fn installed(name: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", name])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("ok installed"))
}

/// The command prefix apt-get runs under: none as root, `sudo -n` otherwise.
fn runner(package: &DebianPackage) -> Result<Vec<&'static str>, BrokerError> {
    if which("apt-get").is_none() {
        return Err(cannot(
            package,
            "there is no apt-get here; install it with this system's package manager",
        ));
    }
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(Vec::new());
    }
    match which("sudo") {
        Some(_) => Ok(vec!["sudo", "-n"]),
        None => Err(cannot(package, "not root, and there is no sudo")),
    }
}

/// Runs `apt-get VERB ARGS` quietly; what it printed when it failed.
fn apt_get(runner: &[&str], verb: &str, packages: &[&str]) -> Result<(), String> {
    let (program, prefix) = match runner.split_first() {
        Some((first, rest)) => (*first, rest.to_vec()),
        None => ("apt-get", Vec::new()),
    };
    let mut command = Command::new(program);
    command.args(prefix);
    if !runner.is_empty() {
        command.arg("apt-get");
    }
    command
        .args(["-q", "-y", "-o"])
        .arg(format!("DPkg::Lock::Timeout={LOCK_TIMEOUT_S}"))
        .arg(verb);
    if verb == "install" {
        command.arg("--no-install-recommends");
    }
    let output = command
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run apt-get: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "apt-get {verb} {} failed ({}): {}",
        packages.join(" "),
        output.status,
        process::last_lines(said.trim(), 5)
    ))
}

/// Stops and disables the system service a package started, where systemd runs.
fn stop_service(runner: &[&str], service: &str) {
    if !std::path::Path::new("/run/systemd/system").exists() {
        return;
    }
    let mut command = Command::new(runner.first().copied().unwrap_or("systemctl"));
    if let Some((_, rest)) = runner.split_first() {
        command.args(rest).arg("systemctl");
    }
    let stopped = command
        .args(["disable", "--now", service])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if stopped {
        eprintln!(
            "{service}: its system service is stopped and disabled (brokerbench runs its own)"
        );
    }
}

/// `program` on PATH, as a shell would find it.
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

fn cannot(package: &DebianPackage, why: &str) -> BrokerError {
    BrokerError::CannotInstall {
        broker: package.broker,
        package: package.package,
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A package dpkg has: nothing to install (dpkg itself, on any Debian or Ubuntu).
    const DPKG: DebianPackage = DebianPackage {
        broker: "test",
        package: "dpkg",
        with: &[],
        service: None,
    };

    #[test]
    fn a_program_that_is_there_is_used_as_it_is() {
        let found = ensure(&DPKG, || Some(PathBuf::from("/usr/bin/dpkg"))).unwrap();
        assert_eq!(found, PathBuf::from("/usr/bin/dpkg"));
    }

    #[test]
    fn a_program_that_cannot_be_had_says_what_to_install_by_hand() {
        let message = ensure(&DPKG, || None).unwrap_err().to_string();
        assert!(
            message.contains("could not install test's Debian package dpkg")
                && message.contains("`sudo apt-get install dpkg`"),
            "{message}"
        );
    }
}
