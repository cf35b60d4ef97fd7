//! The managed nats-server: Debian's `nats-server` package, JetStream on, its store in the
//! broker folder, client and monitoring ports on loopback. Client port
//! `BROKERBENCH_NATS_PORT` (default 4322, not NATS's 4222, so a system server can run beside
//! it); monitoring on the client port + 4000.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use brokerbench_brokers::daemon::{self, Daemon};
use brokerbench_brokers::lifecycle::{self, Lifecycle};
use brokerbench_brokers::{BrokerError, BrokerStatus, ManagedBroker};

const NAME: &str = "nats";
const PROGRAM: &str = "nats-server";
const PORT_VARIABLE: &str = "BROKERBENCH_NATS_PORT";
const DEFAULT_PORT: u16 = 4322;
const MONITOR_OFFSET: u16 = 4000;
const MAX_PORT: u16 = 65535 - MONITOR_OFFSET;

pub struct ManagedNats {
    daemon: Daemon,
    port: Result<u16, String>,
}

impl ManagedNats {
    pub fn new(home: &Path) -> Self {
        let port = daemon::port_variable(
            NAME,
            PORT_VARIABLE,
            DEFAULT_PORT,
            MAX_PORT,
            "the monitoring port is the client port + 4000",
        )
        .map_err(|e| e.to_string());
        ManagedNats {
            daemon: Daemon::new(NAME, home),
            port,
        }
    }

    fn port(&self) -> Result<u16, BrokerError> {
        self.port
            .clone()
            .map_err(|_| BrokerError::InvalidPortSetting {
                broker: NAME,
                variable: PORT_VARIABLE,
                value: std::env::var(PORT_VARIABLE).unwrap_or_default(),
                max: MAX_PORT,
                why: "the monitoring port is the client port + 4000",
            })
    }

    fn program() -> Option<std::path::PathBuf> {
        ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"]
            .iter()
            .map(|d| Path::new(d).join(PROGRAM))
            .find(|p| p.is_file())
    }

    fn version() -> String {
        Self::program()
            .and_then(|p| Command::new(p).arg("--version").output().ok())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .and_then(|v| v.rsplit('v').next().map(str::to_string))
            .unwrap_or_else(|| "unknown".into())
    }

    fn configuration(&self, port: u16) -> String {
        format!(
            "# Written by brokerbench: the managed nats-server.\nserver_name: brokerbench\nlisten: 127.0.0.1:{port}\nhttp: 127.0.0.1:{}\nmax_payload: 8MB\njetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 1GB\n  max_file_store: 20GB\n}}\n",
            port + MONITOR_OFFSET,
            self.daemon.data_dir().display()
        )
    }

    fn status_of(&self, pid: u32, port: u16) -> BrokerStatus {
        self.daemon
            .status_of(pid, format!("127.0.0.1:{port}"), Self::version())
    }
}

/// True when the server at `port` sends its INFO with JetStream on.
fn answers(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    text.starts_with("INFO ") && text.contains("\"jetstream\":true")
}

impl Lifecycle for ManagedNats {
    /// The server process and its client port.
    type Starting = (Child, u16);

    fn dir(&self) -> PathBuf {
        self.daemon.dir.clone()
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.port()?;
        Self::program().map(|_| ()).ok_or_else(missing)
    }

    fn running_pid(&self) -> Option<u32> {
        self.daemon.running_pid()
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        let port = self.port.clone().unwrap_or(DEFAULT_PORT);
        ManagedNats::status_of(self, pid, port)
    }

    fn wait_running(&self, _status: &BrokerStatus) -> Result<(), BrokerError> {
        Ok(())
    }

    fn start(&self) -> Result<Self::Starting, BrokerError> {
        let port = self.port()?;
        for p in [port, port + MONITOR_OFFSET] {
            if !daemon::can_listen(p) {
                return Err(BrokerError::PortInUse {
                    broker: NAME,
                    port: p,
                    dir: self.daemon.dir.clone(),
                });
            }
        }
        let mut command = Command::new(Self::program().ok_or_else(missing)?);
        command.arg("-c").arg(self.daemon.config_file());
        let child = self.daemon.spawn(&self.configuration(port), command)?;
        Ok((child, port))
    }

    fn wait_started(
        &self,
        (child, port): &mut Self::Starting,
    ) -> Result<BrokerStatus, BrokerError> {
        let port = *port;
        self.daemon.wait(child, || answers(port))?;
        Ok(ManagedNats::status_of(self, child.id(), port))
    }

    fn abandon(&self, (child, _): Self::Starting) {
        self.daemon.abandon(child);
    }

    fn stop(&self, pid: u32) -> Result<(), BrokerError> {
        self.daemon.stop(pid)
    }

    fn leftovers(&self) -> Vec<PathBuf> {
        self.daemon.leftovers()
    }
}

fn missing() -> BrokerError {
    BrokerError::PackageMissing {
        broker: NAME,
        program: PROGRAM,
        looked_in: "/usr/sbin, /usr/bin, /usr/local/bin, /usr/local/sbin".into(),
        package: "nats-server",
    }
}

impl ManagedBroker for ManagedNats {
    fn install(&self) -> Result<String, BrokerError> {
        match Self::program() {
            Some(p) => Ok(format!(
                "nats {} is installed ({}, Debian package nats-server)",
                Self::version(),
                p.display()
            )),
            None => Err(missing()),
        }
    }

    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(self)
    }

    fn down(&self) -> Result<Option<u32>, BrokerError> {
        lifecycle::down(self)
    }

    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        self.port()?;
        Ok(lifecycle::status(self))
    }

    fn client_address(&self, status: &BrokerStatus) -> String {
        format!("nats://{}", status.address)
    }

    fn metrics_url(&self) -> Option<String> {
        self.port
            .as_ref()
            .ok()
            .map(|port| format!("http://127.0.0.1:{}", port + MONITOR_OFFSET))
    }

    fn endpoints(&self) -> Vec<String> {
        self.metrics_url()
            .map(|url| format!("monitoring: {url}/varz  {url}/jsz"))
            .into_iter()
            .collect()
    }
}
