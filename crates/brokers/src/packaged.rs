//! A managed broker that is one process of a system package (Debian's `redis-server`,
//! `mosquitto`), not its system service: started from its own folder ([`Daemon`]) with a
//! configuration brokerbench writes at each start, on one port (`BROKERBENCH_<NAME>_PORT`) and,
//! with `--tls`, a TLS port beside it (the port + 1). Its family says what differs
//! ([`Package`]); the lifecycle, the port checks, the restart after a kill and the TLS switch
//! are here, once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::daemon::{self, Daemon};
use crate::driver_file::DriverFile;
use crate::lifecycle;
use crate::managed::{PortRule, PortSetting};
use crate::one_process::OneProcess;
use crate::system_package::{self, DebianPackage};
use crate::tls::{self, TlsFiles};
use crate::{BrokerError, BrokerStatus, ManagedBroker};

/// The TLS port is the plain port + this.
pub const TLS_OFFSET: u16 = 1;
/// Where Debian (or a hand install) puts a package's program.
const SYSTEM_DIRS: [&str; 4] = ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"];

/// What a family's packaged broker is.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The family's name, e.g. `redis`.
    pub name: &'static str,
    /// e.g. `BROKERBENCH_REDIS_PORT`.
    pub port_variable: &'static str,
    pub default_port: u16,
    /// The program and the Debian package that has it, e.g. `redis-server` twice.
    pub program: &'static str,
    pub package: &'static str,
    /// The system service the package starts on installation (stopped and disabled then).
    pub service: Option<&'static str>,
    /// The argument that makes the program print its version (`--version`), and what comes
    /// just before the version in its answer (`v=`: `Redis server v=7.0.15 sha=…`).
    pub version_argument: &'static str,
    pub version_after: &'static str,
    /// The program's arguments before its configuration file's path (`-c`), if any.
    pub config_flag: Option<&'static str>,
    /// The port and the TLS port a configuration names.
    pub port_of: fn(&str) -> Option<u16>,
    pub tls_port_of: fn(&str) -> Option<u16>,
    /// The scheme of its clients' URLs (`redis`): `redis://127.0.0.1:6379`.
    pub scheme: &'static str,
    /// The scheme over TLS (`rediss`).
    pub tls_scheme: &'static str,
    /// What its driver file reaches (`Redis`), and the field of its URL (`redis_url`).
    pub title: &'static str,
    pub url_field: &'static str,
    /// How one logs in on the TLS port, `{user}` standing for [`tls::USER`].
    pub tls_login: &'static str,
    /// How long `down` waits after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
}

/// Where a start's files are, for the family's configuration and texts.
#[derive(Debug, Clone)]
pub struct Folder {
    /// The broker folder (`<home>/<name>`).
    pub dir: PathBuf,
    pub data_dir: PathBuf,
    pub tls: TlsFiles,
    /// The program a start runs.
    pub program: PathBuf,
}

/// What a family says about its packaged broker.
pub trait Package: Send + Sync + 'static {
    fn spec(&self) -> &'static Spec;
    /// The configuration of a start on `port`, with the TLS port `tls_port` when TLS is on
    /// (the TLS material generated already).
    fn configuration(
        &self,
        folder: &Folder,
        port: u16,
        tls_port: Option<u16>,
    ) -> Result<String, BrokerError>;
    /// Whether a broker on 127.0.0.1:`port` answers its clients.
    fn answers(&self, port: u16) -> bool;
    /// What `broker up` and `status` print below the address (the TLS listener's lines
    /// follow from the spec).
    fn endpoints(&self, folder: &Folder, port: u16) -> Vec<String>;
}

/// The version (digits and dots) just after `marker` in a program's answer.
fn version_after(answer: &str, marker: &str) -> Option<String> {
    let at = answer.find(marker)? + marker.len();
    let version: String = answer[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!version.is_empty()).then_some(version)
}

/// A packaged broker's port setting: its port, and the TLS port beside it.
fn port_rule(spec: &'static Spec) -> PortRule {
    PortRule::above(
        spec.name,
        spec.port_variable,
        spec.default_port,
        &[0, TLS_OFFSET],
        "with --tls the TLS port is the port + 1",
    )
}

/// The managed broker of a [`Package`].
#[derive(Clone)]
pub struct Packaged<P: Package + Clone> {
    daemon: Daemon,
    port: PortSetting,
    package: P,
}

impl<P: Package + Clone> Packaged<P> {
    pub fn new(home: &Path, package: P) -> Self {
        let spec = package.spec();
        let port = port_rule(spec).setting();
        let mut daemon = Daemon::new(spec.name, home);
        daemon.start_timeout = Duration::from_secs(20);
        daemon.stop_grace = spec.stop_grace;
        Packaged {
            daemon,
            port,
            package,
        }
    }

    fn spec(&self) -> &'static Spec {
        self.package.spec()
    }

    fn port(&self) -> Result<u16, BrokerError> {
        self.port.checked()
    }

    /// The configuration the running broker was started with.
    fn running_configuration(&self) -> Option<String> {
        std::fs::read_to_string(self.daemon.config_file()).ok()
    }

    /// The port the running broker was started on, else this handle's.
    fn running_port(&self) -> u16 {
        self.running_configuration()
            .and_then(|text| (self.spec().port_of)(&text))
            .unwrap_or(self.port.or_default())
    }

    /// The TLS port of the running broker, when it was started with TLS.
    fn running_tls_port(&self) -> Option<u16> {
        (self.spec().tls_port_of)(&self.running_configuration()?)
    }

    /// The program a start runs.
    fn program(&self) -> Result<PathBuf, BrokerError> {
        let spec = self.spec();
        self.find_program()
            .ok_or_else(|| BrokerError::PackageMissing {
                broker: spec.name,
                program: spec.program,
                looked_in: SYSTEM_DIRS.join(", "),
                package: spec.package,
            })
    }

    fn find_program(&self) -> Option<PathBuf> {
        SYSTEM_DIRS
            .iter()
            .map(|d| Path::new(d).join(self.spec().program))
            .find(|p| p.is_file())
    }

    /// The program a start runs, its Debian package installed first when it is missing.
    fn installed_program(&self) -> Result<PathBuf, BrokerError> {
        let spec = self.spec();
        let package = DebianPackage {
            broker: spec.name,
            package: spec.package,
            with: &[],
            service: spec.service,
        };
        system_package::ensure(&package, || self.find_program())
    }

    /// The version of the program a start runs, or `unknown`.
    fn version(&self) -> String {
        self.program()
            .ok()
            .and_then(|program| {
                let output = Command::new(program)
                    .arg(self.spec().version_argument)
                    .output()
                    .ok()?;
                version_after(
                    &String::from_utf8_lossy(&output.stdout),
                    self.spec().version_after,
                )
            })
            .unwrap_or_else(|| "unknown".into())
    }

    /// The TLS material and whether TLS is on for the next start.
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.daemon.dir)
    }

    /// Where a start's files are (the program found, or its bare name).
    fn folder(&self) -> Folder {
        Folder {
            dir: self.daemon.dir.clone(),
            data_dir: self.daemon.data_dir(),
            tls: self.tls(),
            program: self
                .program()
                .unwrap_or_else(|_| PathBuf::from(self.spec().program)),
        }
    }

    /// The configuration of a new start on `port`, with the TLS port when TLS is on.
    fn configuration(&self, port: u16) -> Result<String, BrokerError> {
        let tls_port = self.tls().enabled().then_some(port + TLS_OFFSET);
        if tls_port.is_some() {
            self.tls().generate_once()?;
        }
        self.package.configuration(&self.folder(), port, tls_port)
    }

    /// Starts the broker with the configuration `text`, which listens on `port` (and its TLS
    /// port, when it names one).
    fn spawn_with(&self, port: u16, text: &str) -> Result<Child, BrokerError> {
        self.daemon.wait_previous_exit();
        let spec = self.spec();
        for port in std::iter::once(port).chain((spec.tls_port_of)(text)) {
            if !daemon::can_listen(port) {
                return Err(BrokerError::PortInUse {
                    broker: spec.name,
                    port,
                    dir: self.daemon.dir.clone(),
                    variable: spec.port_variable,
                    needs: "<port>, and <port>+1 with --tls",
                });
            }
        }
        let mut command = Command::new(self.program()?);
        command
            .args(spec.config_flag)
            .arg(self.daemon.config_file());
        self.daemon.spawn(text, command)
    }
}

impl<P: Package + Clone> OneProcess for Packaged<P> {
    fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.port()?;
        self.installed_program().map(|_| ())
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        let address = format!("127.0.0.1:{}", self.running_port());
        self.daemon.status_of(pid, address, self.version())
    }

    fn answers(&self) -> bool {
        self.package.answers(self.running_port())
    }

    fn start(&self) -> Result<Child, BrokerError> {
        let port = self.port()?;
        let text = self.configuration(port)?;
        self.spawn_with(port, &text)
    }

    fn start_with(&self, text: &str) -> Result<Child, BrokerError> {
        self.spawn_with(self.running_port(), text)
    }
}

impl<P: Package + Clone> ManagedBroker for Packaged<P> {
    fn install(&self) -> Result<String, BrokerError> {
        let program = self.installed_program()?;
        let spec = self.spec();
        Ok(format!(
            "{} {} is installed ({}, Debian package {})",
            spec.name,
            self.version(),
            program.display(),
            spec.package
        ))
    }

    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(self)
    }

    crate::lifecycle_commands!();

    fn client_address(&self, status: &BrokerStatus) -> String {
        format!("{}://{}", self.spec().scheme, status.address)
    }

    fn port_rule(&self) -> Option<PortRule> {
        Some(*self.port.rule())
    }

    /// The family's own protocol on the plain port (its metrics reader's scheme).
    fn metrics_url(&self) -> Option<String> {
        Some(format!(
            "{}://127.0.0.1:{}",
            self.spec().scheme,
            self.running_port()
        ))
    }

    fn endpoints(&self) -> Vec<String> {
        let (spec, folder) = (self.spec(), self.folder());
        let mut lines = self.package.endpoints(&folder, self.running_port());
        if let Some(port) = self.running_tls_port() {
            let url = format!("{}://127.0.0.1:{port}", spec.tls_scheme);
            let login = spec.tls_login.replace("{user}", tls::USER);
            let file = DriverFile { name: spec.name };
            lines.extend(file.tls_endpoints(&url, &login, &folder.tls, "password"));
        }
        lines
    }

    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let running = (self.daemon.running_pid(), self.running_tls_port().is_some());
        self.tls().switch(self.spec().name, running, on)
    }

    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let (spec, tls) = (self.spec(), self.tls());
        DriverFile { name: spec.name }.one_url(
            (spec.title, spec.url_field),
            [spec.scheme, spec.tls_scheme],
            &status.address,
            self.running_tls_port().map(|port| (port, &tls)),
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_is_read_after_its_marker() {
        let redis = "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1";
        assert_eq!(super::version_after(redis, "v="), Some("7.0.15".into()));
        let mosquitto = "mosquitto version 2.0.11\n\nmosquitto is an MQTT v5.0/v3.1.1/v3.1 broker.";
        assert_eq!(
            super::version_after(mosquitto, "version "),
            Some("2.0.11".into())
        );
        assert_eq!(
            super::version_after("mosquitto version x", "version "),
            None
        );
        assert_eq!(super::version_after("", "v="), None);
    }
}
