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
use brokerbench_brokers::tls::{self, TlsFiles};
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

    fn configuration(&self, port: u16) -> Result<String, BrokerError> {
        let mut text = format!(
            "# Written by brokerbench: the managed nats-server.\nserver_name: brokerbench\nlisten: 127.0.0.1:{port}\nhttp: 127.0.0.1:{}\nmax_payload: 8MB\njetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 1GB\n  max_file_store: 20GB\n}}\n",
            port + MONITOR_OFFSET,
            self.daemon.data_dir().display()
        );
        let files = self.tls();
        if files.enabled() {
            files.generate_once()?;
            text.push_str(&tls_configuration(
                &files,
                &files.password()?,
                &tls::random_password()?,
            ));
        }
        Ok(text)
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.daemon.dir)
    }

    /// Whether the running server was started with TLS (its configuration has the block).
    fn running_tls(&self) -> bool {
        std::fs::read_to_string(self.daemon.config_file()).is_ok_and(|text| text.contains(TLS_MARK))
    }

    /// `tls://brokerbench:PASSWORD@127.0.0.1:PORT`, with the home's CA.
    fn tls_url(&self, port: u16) -> Result<crate::config::NatsUrl, BrokerError> {
        let files = self.tls();
        let mut url = crate::config::NatsUrl::parse(&format!(
            "tls://{}:{}@127.0.0.1:{port}",
            tls::USER,
            files.password()?
        ))
        .map_err(|what| BrokerError::Tls { what })?;
        url.tls = Some(brokerbench_driver::tls::TlsSettings {
            ca_file: Some(files.ca()),
            ..Default::default()
        });
        Ok(url)
    }

    fn status_of(&self, pid: u32, port: u16) -> BrokerStatus {
        self.daemon
            .status_of(pid, format!("127.0.0.1:{port}"), Self::version())
    }
}

/// Marks the TLS part of the configuration.
const TLS_MARK: &str = "# TLS (`brokerbench broker up nats --tls`)";

/// TLS on the client port beside plain connections (`allow_non_tls`), and the user
/// `brokerbench` with `password`; clients that name no user are `anonymous` (`no_auth_user`,
/// with a password nobody is told), so plain runs go on as before.
fn tls_configuration(files: &TlsFiles, password: &str, anonymous_password: &str) -> String {
    format!(
        "{TLS_MARK}: a throwaway CA's certificate, see tls/.\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  timeout: 2\n}}\nallow_non_tls: true\nauthorization {{\n  users: [\n    {{user: {}, password: \"{password}\"}}\n    {{user: anonymous, password: \"{anonymous_password}\"}}\n  ]\n}}\nno_auth_user: anonymous\n",
        files.server_certificate().display(),
        files.server_key().display(),
        files.ca().display(),
        tls::USER,
    )
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
                    variable: PORT_VARIABLE,
                    needs: "<port> and <port>+4000 (monitoring)",
                });
            }
        }
        let mut command = Command::new(Self::program().ok_or_else(missing)?);
        command.arg("-c").arg(self.daemon.config_file());
        let child = self.daemon.spawn(&self.configuration(port)?, command)?;
        Ok((child, port))
    }

    fn wait_started(
        &self,
        (child, port): &mut Self::Starting,
    ) -> Result<BrokerStatus, BrokerError> {
        let port = *port;
        self.daemon.wait(child, || answers(port))?;
        if self.running_tls() {
            // The user logs in over TLS with the home's CA, as a client of the driver file will.
            let url = self.tls_url(port)?;
            if let Err(e) = crate::conn::Conn::connect(&url, Duration::from_secs(5)) {
                return Err(BrokerError::StartFailed {
                    broker: NAME,
                    reason: format!(
                        "the user `{}` could not log in over TLS on 127.0.0.1:{port}: {e:?}",
                        tls::USER
                    ),
                    log_file: self.daemon.log_file(),
                    log_tail: brokerbench_brokers::process::log_tail(&self.daemon.log_file(), 20),
                });
            }
        }
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
        let mut lines: Vec<String> = self
            .metrics_url()
            .map(|url| format!("monitoring: {url}/varz  {url}/jsz"))
            .into_iter()
            .collect();
        if let (true, Ok(port)) = (self.running_tls(), self.port()) {
            lines.push(format!(
                "TLS:  tls://127.0.0.1:{port} (user `{}`; plain nats:// on the same port goes on as before)",
                tls::USER
            ));
            lines.push(format!("CA:   {}", self.tls().ca().display()));
            lines.push("`brokerbench broker status nats --driver-file > nats-tls.yaml` writes a driver file for it (it holds the password)".into());
        }
        lines
    }

    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        self.tls().switch(
            NAME,
            self.daemon
                .running_pid()
                .map(|pid| (pid, self.running_tls())),
            on,
        )
    }

    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        if !self.running_tls() {
            return Ok(format!(
                "\
# The managed nats-server (`brokerbench broker status nats --driver-file`).
# Start it with TLS and a user: brokerbench broker down nats; brokerbench broker up nats --tls
driver: nats
servers: nats://{}
",
                status.address
            ));
        }
        let files = self.tls();
        Ok(format!(
            "\
# The managed nats-server over TLS (`brokerbench broker status nats --driver-file`).
# It holds the password of the user `{user}`: keep it private. brokerbench writes it into no
# result, log or report. With servers set, a run samples the server's process when given
# --broker-process nats-server.
driver: nats
servers: tls://{user}:{password}@{address}
tls: {{ca_file: '{ca}'}}
",
            user = tls::USER,
            password = files.password()?,
            address = status.address,
            ca = files.ca().display(),
        ))
    }
}
