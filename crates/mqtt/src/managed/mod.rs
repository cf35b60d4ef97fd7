//! The managed MQTT broker: Debian's `mosquitto` (not the system service), one broker whose
//! configuration, persistence file and log live in the broker folder, listening on
//! 127.0.0.1:`BROKERBENCH_MQTT_PORT` (default 1883, MQTT's own, so OpenMessaging Benchmark
//! driver files name it unchanged), its `$SYS` figures published every second; with `--tls`,
//! a TLS listener and a user beside it (see [`secure`]).

mod layout;
mod secure;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use brokerbench_brokers::daemon::{self, Daemon};
use brokerbench_brokers::lifecycle::{self, Lifecycle};
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{BrokerError, BrokerStatus, ManagedBroker};

const NAME: &str = "mqtt";
const PORT_VARIABLE: &str = "BROKERBENCH_MQTT_PORT";
const DEFAULT_PORT: u16 = 1883;
/// The highest port setting: with `--tls` the TLS port is the next.
const MAX_PORT: u16 = 65534;
const WHY_MAX: &str = "with --tls the TLS listener is on the port + 1";
const PROGRAM: &str = "mosquitto";
const PACKAGE: &str = "mosquitto";
/// Where Debian (or a hand install) puts mosquitto.
const SYSTEM_DIRS: [&str; 4] = ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"];

#[derive(Clone)]
pub struct ManagedMqtt {
    daemon: Daemon,
    port: Result<u16, String>,
}

impl ManagedMqtt {
    pub fn new(home: &Path) -> Self {
        let port = daemon::port_variable(NAME, PORT_VARIABLE, DEFAULT_PORT, MAX_PORT, WHY_MAX)
            .map_err(|e| e.to_string());
        let mut daemon = Daemon::new(NAME, home);
        daemon.start_timeout = Duration::from_secs(20);
        daemon.stop_grace = Duration::from_secs(5);
        ManagedMqtt { daemon, port }
    }

    fn port(&self) -> Result<u16, BrokerError> {
        self.port
            .clone()
            .map_err(|_| BrokerError::InvalidPortSetting {
                broker: NAME,
                variable: PORT_VARIABLE,
                value: std::env::var(PORT_VARIABLE).unwrap_or_default(),
                max: MAX_PORT,
                why: WHY_MAX,
            })
    }

    /// The port the running server was started on (its configuration), else this handle's.
    fn running_port(&self) -> u16 {
        std::fs::read_to_string(self.daemon.config_file())
            .ok()
            .and_then(|text| layout::port_of(&text))
            .or_else(|| self.port.clone().ok())
            .unwrap_or(DEFAULT_PORT)
    }

    /// The mosquitto a start runs.
    fn program(&self) -> Result<PathBuf, BrokerError> {
        SYSTEM_DIRS
            .iter()
            .map(|d| Path::new(d).join(PROGRAM))
            .find(|p| p.is_file())
            .ok_or_else(|| BrokerError::PackageMissing {
                broker: NAME,
                program: PROGRAM,
                looked_in: SYSTEM_DIRS.join(", "),
                package: PACKAGE,
            })
    }

    /// The version of the mosquitto a start runs (`2.0.11`), or `unknown`.
    fn version(&self) -> String {
        self.program()
            .ok()
            .and_then(|program| {
                let output = Command::new(program).arg("-h").output().ok()?;
                layout::version_of(&String::from_utf8_lossy(&output.stdout))
            })
            .unwrap_or_else(|| "unknown".into())
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.daemon.dir)
    }

    /// The TLS port of the running server, when it was started with TLS.
    fn running_tls_port(&self) -> Option<u16> {
        let text = std::fs::read_to_string(self.daemon.config_file()).ok()?;
        secure::tls_port(&text)
    }

    /// The configuration of a new start on `port`: with the TLS listener and the user when
    /// TLS is on.
    fn configuration(&self, port: u16) -> Result<String, BrokerError> {
        let root = layout::running_as_root();
        let mut text = layout::mosquitto_conf(port, &self.daemon.data_dir(), root);
        if self.tls().enabled() {
            self.tls().generate_once()?;
            let passwords = secure::write_passwords(&self.tls(), &self.program()?)?;
            text += &secure::tls_lines(&self.tls(), port + secure::TLS_OFFSET, &passwords)?;
        }
        Ok(text)
    }

    /// Starts the server with the configuration `text`, which listens on `port` (and its TLS
    /// port, when it names one).
    fn spawn_with(&self, port: u16, text: &str) -> Result<Child, BrokerError> {
        for port in std::iter::once(port).chain(secure::tls_port(text)) {
            if !daemon::can_listen(port) {
                return Err(BrokerError::PortInUse {
                    broker: NAME,
                    port,
                    dir: self.daemon.dir.clone(),
                    variable: PORT_VARIABLE,
                    needs: "<port>, and <port>+1 with --tls",
                });
            }
        }
        let mut command = Command::new(self.program()?);
        command.arg("-c").arg(self.daemon.config_file());
        self.daemon.spawn(text, command)
    }

    fn wait_answering(&self, child: &mut Child) -> Result<(), BrokerError> {
        let port = self.running_port();
        self.daemon.wait(child, || answers(port))
    }

    /// The broker started again after it stopped or was killed (a fault's `restart_after`),
    /// with its configuration and persistence file as they were; its pid.
    fn restart(&self, id: u32) -> Result<u32, BrokerError> {
        if id != 1 {
            return Err(BrokerError::TooManyNodes {
                broker: NAME,
                asked: id,
                max: 1,
            });
        }
        if let Some(pid) = self.daemon.running_pid() {
            return Ok(pid);
        }
        let file = self.daemon.config_file();
        let text = std::fs::read_to_string(&file).map_err(BrokerError::io("reading", &file))?;
        let mut child = self.spawn_with(self.running_port(), &text)?;
        if let Err(e) = self.wait_answering(&mut child) {
            self.daemon.abandon(child);
            return Err(e);
        }
        Ok(child.id())
    }
}

/// Whether a broker on 127.0.0.1:`port` accepts an MQTT connection.
fn answers(port: u16) -> bool {
    let url = crate::url::MqttUrl::parse(&format!("mqtt://127.0.0.1:{port}"))
        .expect("a loopback URL parses");
    let session = crate::conn::Session {
        version: crate::packet::Version::V311,
        client_id: format!("brokerbench-probe-{}", std::process::id()),
        clean: true,
        keep_alive_s: 60,
        session_expiry_s: None,
        receive_maximum: None,
    };
    crate::conn::Conn::connect(&url, &session, Duration::from_secs(1))
        .map(|mut conn| conn.disconnect(false))
        .is_ok()
}

impl Lifecycle for ManagedMqtt {
    type Starting = Child;

    fn dir(&self) -> PathBuf {
        self.daemon.dir.clone()
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.port()?;
        self.program().map(|_| ())
    }

    fn running_pid(&self) -> Option<u32> {
        self.daemon.running_pid()
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        let address = format!("127.0.0.1:{}", self.running_port());
        self.daemon.status_of(pid, address, self.version())
    }

    fn check_running(&self, _status: &BrokerStatus) -> Result<(), BrokerError> {
        Ok(())
    }

    fn start_again(&self, id: u32) -> Result<u32, BrokerError> {
        self.restart(id)
    }

    fn wait_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        let port = self.running_port();
        let answered = brokerbench_brokers::managed::poll(self.daemon.start_timeout, || {
            answers(port).then_some(())
        });
        answered.ok_or_else(|| BrokerError::StartFailed {
            broker: NAME,
            reason: format!(
                "the running broker (pid {}) did not answer on {} within {:?}",
                status.pid, status.address, self.daemon.start_timeout
            ),
            log_file: self.daemon.log_file(),
            log_tail: brokerbench_brokers::process::log_tail(&self.daemon.log_file(), 20),
        })
    }

    fn start(&self) -> Result<Child, BrokerError> {
        let port = self.port()?;
        let text = self.configuration(port)?;
        self.spawn_with(port, &text)
    }

    fn wait_started(&self, child: &mut Child) -> Result<BrokerStatus, BrokerError> {
        self.wait_answering(child)?;
        Ok(self.status_of(child.id()))
    }

    fn abandon(&self, child: Child) {
        self.daemon.abandon(child);
    }

    fn stop(&self, pid: u32) -> Result<(), BrokerError> {
        self.daemon.stop(pid)
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        self.daemon.leftovers()
    }
}

impl ManagedBroker for ManagedMqtt {
    fn install(&self) -> Result<String, BrokerError> {
        let program = self.program()?;
        Ok(format!(
            "mosquitto {} is installed ({}, Debian package {PACKAGE})",
            self.version(),
            program.display()
        ))
    }

    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(self)
    }

    fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        self.restart(id)
    }

    fn down(&self) -> Result<Option<u32>, BrokerError> {
        lifecycle::down(self)
    }

    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        self.port()?;
        Ok(lifecycle::status(self))
    }

    fn client_address(&self, status: &BrokerStatus) -> String {
        format!("mqtt://{}", status.address)
    }

    /// `$SYS` on the plain listener (see [`crate::metrics`]).
    fn metrics_url(&self) -> Option<String> {
        Some(format!("mqtt://127.0.0.1:{}", self.running_port()))
    }

    fn endpoints(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "persistence: {}/mosquitto.db, saved when the broker stops (and every 30 minutes): a killed broker loses what came since",
                self.daemon.data_dir().display()
            ),
            format!(
                "$SYS/# every second; mosquitto_sub -p {} -t '$SYS/#' -v shows it; one broker (bridges are not managed)",
                self.running_port()
            ),
        ];
        if let Some(port) = self.running_tls_port() {
            lines.push(format!(
                "TLS:  mqtts://127.0.0.1:{port} (user `{}` only; the plain listener stays anonymous)",
                tls::USER
            ));
            lines.push(format!("CA:   {}", self.tls().ca().display()));
            lines.push("`brokerbench broker status mqtt --driver-file > mqtt-tls.yaml` writes a driver file for it (it holds the password)".into());
        }
        lines
    }

    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let running = self.daemon.running_pid();
        let started_with_tls = self.running_tls_port().is_some();
        self.tls()
            .switch(NAME, running.map(|pid| (pid, started_with_tls)), on)
    }

    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let Some(port) = self.running_tls_port() else {
            return Ok(format!(
                "\
# The managed MQTT broker (`brokerbench broker status mqtt --driver-file`).
# Start it with TLS and a user: brokerbench broker down mqtt; brokerbench broker up mqtt --tls
driver: mqtt
mqtt_url: mqtt://{}
",
                status.address
            ));
        };
        let files = self.tls();
        Ok(format!(
            "\
# The managed MQTT broker over TLS (`brokerbench broker status mqtt --driver-file`).
# It holds the password of the user `{user}`: keep it private. brokerbench writes it into no
# result, log or report.
driver: mqtt
mqtt_url: mqtts://{user}:{password}@127.0.0.1:{port}
tls: {{ca_file: '{ca}'}}
",
            user = tls::USER,
            password = files.password()?,
            ca = files.ca().display(),
        ))
    }
}
