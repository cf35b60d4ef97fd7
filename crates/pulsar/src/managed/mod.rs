//! The managed Pulsar: the release brokerbench pins (see [`install`]), fetched on first use,
//! run as Pulsar standalone (broker, one to three bookies and the metadata store in one JVM;
//! no functions worker, no stream storage) with its configuration, data and log in the broker
//! folder, listening on 127.0.0.1:`BROKERBENCH_PULSAR_PORT` (default 6650, Pulsar's own) for
//! the binary protocol and on that port + 1430 (8080) for the admin REST API and `/metrics`,
//! so OpenMessaging Benchmark driver files name it unchanged.

mod install;
mod layout;
mod secure;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use brokerbench_brokers::daemon::{self, Daemon};
use brokerbench_brokers::driver_file::DriverFile;
use brokerbench_brokers::managed::{PortRule, PortSetting};
use brokerbench_brokers::one_process::OneProcess;
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{
    cluster, BrokerError, BrokerStatus, ManagedBroker, NodeStatus, UpOptions,
};

use install::RELEASE;
pub use install::VERSION;

const NAME: &str = "pulsar";
const DEFAULT_PORT: u16 = 6650;
/// The web service (admin API, metrics) listens on the binary port + this: 8080 by default.
pub const WEB_OFFSET: u16 = 1430;
const PORT_RULE: PortRule = PortRule::above(
    NAME,
    "BROKERBENCH_PULSAR_PORT",
    DEFAULT_PORT,
    &[0, secure::TLS_OFFSET, WEB_OFFSET],
    "the admin API and metrics listen on the port + 1430",
);
/// The JVM's memory for this machine: Pulsar's defaults (2 GiB heap, 4 GiB direct) are for a
/// server of its own.
const MEMORY: &str = "-Xms256m -Xmx1g -XX:MaxDirectMemorySize=1g";
/// The first start creates the metadata store and the bookie's folders.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Starts of a standalone whose bookie registration loops (see `wait_settled`), at most.
const SETTLE_ATTEMPTS: u32 = 3;
/// More "Lock on resource /ledgers/available" lines than this in a start's log: the loop
/// (it writes hundreds a second; a clean start a few).
const REGISTRATION_LOOP: usize = 20;
/// `--nodes N` runs N bookies (storage nodes) beside the one broker, in the standalone JVM.
const MAX_BOOKIES: u32 = 3;

#[derive(Clone)]
pub struct ManagedPulsar {
    daemon: Daemon,
    port: PortSetting,
    options: UpOptions,
}

impl ManagedPulsar {
    pub fn new(home: &Path) -> Self {
        let port = PORT_RULE.setting();
        let mut daemon = Daemon::new(NAME, home);
        daemon.start_timeout = START_TIMEOUT;
        ManagedPulsar {
            daemon,
            port,
            options: UpOptions::default(),
        }
    }

    /// The bookies of the next start: `--nodes`, else one.
    fn bookies(&self) -> u32 {
        self.options.nodes.unwrap_or(1)
    }

    /// The bookies the last start ran (1 before any).
    fn running_bookies(&self) -> u32 {
        self.running_config()
            .map(|text| layout::bookies(&text))
            .unwrap_or(1)
    }

    /// A start with another number of bookies than the last finds ledgers and metadata of
    /// another standalone: they go.
    fn clear_data_of_another_size(&self, bookies: u32) -> Result<(), BrokerError> {
        let data = self.daemon.data_dir();
        let before = self.running_bookies();
        if before == bookies || !data.exists() {
            return Ok(());
        }
        eprintln!(
            "pulsar: a new standalone with {bookies} bookie(s): removing the data of the one with {before} ({})",
            data.display()
        );
        std::fs::remove_dir_all(&data).map_err(BrokerError::io("removing", &data))
    }

    fn port(&self) -> Result<u16, BrokerError> {
        self.port.checked()
    }

    /// The configuration the running broker was started with, if any.
    fn running_config(&self) -> Option<String> {
        std::fs::read_to_string(self.daemon.config_file()).ok()
    }

    /// The binary-protocol port the running broker was started on, else this handle's.
    fn running_port(&self) -> u16 {
        self.running_config()
            .and_then(|text| layout::service_port(&text))
            .unwrap_or(self.port.or_default())
    }

    /// The admin API's port of the running broker, else this handle's.
    pub fn web_port(&self) -> u16 {
        self.running_config()
            .and_then(|text| layout::web_port(&text))
            .or_else(|| web_port(self.running_port()))
            .unwrap_or(DEFAULT_PORT + WEB_OFFSET)
    }

    /// `bin/pulsar standalone` with our configuration file as one argument and `bookies`
    /// bookies; the script `exec`s the JVM, so the child is the broker.
    fn command(&self, bookies: u32) -> Command {
        let dir = &self.daemon.dir;
        let data = self.daemon.data_dir();
        let mut command = Command::new("bash");
        command
            .arg(self.script())
            .arg("standalone")
            .arg("-c")
            .arg(self.daemon.config_file())
            .args(["--no-functions-worker", "--no-stream-storage"])
            .arg("--bookkeeper-dir")
            .arg(data.join("bookkeeper"))
            .arg("--metadata-dir")
            .arg(data.join("metadata"))
            .arg("--num-bookies")
            .arg(bookies.to_string())
            .current_dir(dir)
            .env("PULSAR_STANDALONE_CONF", self.daemon.config_file())
            .env("PULSAR_MEM", MEMORY)
            .env("PULSAR_GC", "-XX:+UseG1GC")
            // Not empty, so the script adds no GC log of its own.
            .env("PULSAR_GC_LOG", " ")
            .env("PULSAR_LOG_DIR", dir);
        command
    }

    /// Starts the broker with a new configuration on the port setting's ports (and its TLS
    /// listener when TLS is on).
    fn spawn(&self) -> Result<Child, BrokerError> {
        let port = self.port()?;
        let web = web_port(port).ok_or_else(|| PORT_RULE.out_of_range(port))?;
        let bookies = self.bookies();
        let mut text = layout::standalone_conf(&self.distribution(), port, web, bookies)?;
        if self.tls().enabled() {
            text.push_str(&secure::block(&self.tls(), port + secure::TLS_OFFSET)?);
        }
        self.check_ports(&text)?;
        self.clear_data_of_another_size(bookies)?;
        self.spawn_with(&text)
    }

    /// Starts the broker with the configuration `text`, on the ports it names.
    fn spawn_with(&self, text: &str) -> Result<Child, BrokerError> {
        self.daemon.wait_previous_exit();
        self.check_ports(text)?;
        self.daemon.spawn(text, self.command(layout::bookies(text)))
    }

    /// Every port the configuration `text` names is free.
    fn check_ports(&self, text: &str) -> Result<(), BrokerError> {
        let ports = [
            layout::service_port(text),
            layout::web_port(text),
            secure::tls_port(text),
        ];
        for port in ports.into_iter().flatten() {
            if !daemon::can_listen(port) {
                return Err(BrokerError::PortInUse {
                    broker: NAME,
                    port,
                    dir: self.daemon.dir.clone(),
                    variable: PORT_RULE.variable,
                    needs: "<port>, <port>+1 with --tls, and <port>+1430 (admin API and metrics)",
                });
            }
        }
        Ok(())
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.daemon.dir)
    }

    /// The TLS port of the running broker, when it was started with TLS.
    fn running_tls_port(&self) -> Option<u16> {
        self.running_config()
            .filter(|text| text.contains(secure::TLS_MARK))
            .and_then(|text| secure::tls_port(&text))
    }

    /// Waits until the started broker answers, or its bookie's registration loops (its log,
    /// read again about once a second).
    fn wait_answering_or_looping(&self, child: &mut Child) -> Result<(), BrokerError> {
        let (port, web) = (self.running_port(), self.web_port());
        let polls = std::cell::Cell::new(0u32);
        self.daemon.wait(child, || {
            polls.set(polls.get() + 1);
            answers(port, web) || (polls.get().is_multiple_of(10) && self.registration_loops())
        })
    }

    /// Waits until the started broker answers with its bookies registered once. After a
    /// SIGKILL the standalone's metadata store (RocksDB, which has no sessions to expire)
    /// still holds the killed bookie's registration, and sometimes (2 of 8 restarts here) the
    /// new bookie's registration lock and that stale entry take turns deleting each other
    /// without end: the broker answers but no ledger can be written ("Not enough non-faulty
    /// bookies"). A clean stop and start clears it, so such a start is done again, twice at
    /// most, as soon as the loop shows: with a core kept busy, a looping start took 38 s
    /// to answer.
    fn wait_settled(&self, child: &mut Child) -> Result<(), BrokerError> {
        for attempt in 1..=SETTLE_ATTEMPTS {
            self.wait_answering_or_looping(child)?;
            std::thread::sleep(Duration::from_secs(1));
            if !self.registration_loops() {
                return Ok(());
            }
            if attempt == SETTLE_ATTEMPTS {
                break;
            }
            eprintln!("pulsar: the bookie's registration loops (a stale entry of a killed start): stopping and starting the standalone again");
            self.daemon.stop(child.id())?;
            let file = self.daemon.config_file();
            let text = std::fs::read_to_string(&file).map_err(BrokerError::io("reading", &file))?;
            *child = self.spawn_with(&text)?;
        }
        Err(BrokerError::StartFailed {
            broker: NAME,
            reason: format!(
                "its bookie's registration kept looping after {SETTLE_ATTEMPTS} starts"
            ),
            log_file: self.daemon.log_file(),
            log_tail: brokerbench_brokers::process::log_tail(&self.daemon.log_file(), 20),
        })
    }

    /// Whether this start's log shows the bookie registration loop (its lock taken again and
    /// again: a clean start takes it once or twice).
    fn registration_loops(&self) -> bool {
        let log = std::fs::read_to_string(self.daemon.log_file()).unwrap_or_default();
        log.matches("Lock on resource /ledgers/available").count() > REGISTRATION_LOOP
    }
}

/// The web service's port for the binary `port`.
fn web_port(port: u16) -> Option<u16> {
    port.checked_add(WEB_OFFSET)
}

/// The admin API of a managed broker whose binary protocol is on `port`.
pub fn admin_url(port: u16) -> Option<String> {
    web_port(port).map(|web| format!("http://127.0.0.1:{web}"))
}

/// Whether the broker takes clients: its binary port accepts a connection and its admin API
/// knows the namespace `public/default` (standalone creates it once the broker runs).
fn answers(port: u16, web: u16) -> bool {
    let listening = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    listening
        && brokerbench_brokers::http::get(
            web,
            "/admin/v2/namespaces/public/default",
            None,
            Duration::from_secs(2),
        )
        .is_some()
}

impl OneProcess for ManagedPulsar {
    fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.port()?;
        if let Some(nodes) = self.options.nodes {
            cluster::check_size(NAME, nodes, MAX_BOOKIES)?;
        }
        RELEASE.check_installed(&self.daemon.dir)
    }

    /// Node 1 is the broker's JVM; nodes 2 and 3 are its other bookies, which run in it (no
    /// process of their own to stop or kill).
    fn status_of(&self, pid: u32) -> BrokerStatus {
        let address = format!("127.0.0.1:{}", self.running_port());
        let mut status = self
            .daemon
            .status_of(pid, address.clone(), VERSION.to_string());
        status
            .nodes
            .extend((2..=self.running_bookies()).map(|id| NodeStatus {
                id,
                pid: None,
                address: address.clone(),
                up: true,
            }));
        status
    }

    fn check_running(&self, status: &BrokerStatus) -> Result<(), BrokerError> {
        self.options.check_running(NAME, status)
    }

    fn answers(&self) -> bool {
        answers(self.running_port(), self.web_port())
    }

    fn start(&self) -> Result<Child, BrokerError> {
        self.spawn()
    }

    fn start_with(&self, text: &str) -> Result<Child, BrokerError> {
        self.spawn_with(text)
    }

    fn wait_started(&self, child: &mut Child) -> Result<(), BrokerError> {
        self.wait_settled(child)
    }

    /// The broker started again after it stopped or was killed (a fault's `restart_after`),
    /// with its configuration and data as they were; its pid.
    fn restart(&self, id: u32) -> Result<u32, BrokerError> {
        if id != 1 {
            return Err(BrokerError::Unsupported {
                what: format!("starting node {id} on its own (a bookie in node 1's JVM)"),
            });
        }
        self.daemon.start_as_it_was(
            |text| self.spawn_with(text),
            |child| self.wait_settled(child),
        )
    }
}

impl ManagedBroker for ManagedPulsar {
    brokerbench_brokers::lifecycle_commands!(installs RELEASE);

    fn max_nodes(&self) -> u32 {
        MAX_BOOKIES
    }

    /// `--nodes N`: N bookies beside the broker, in the one standalone JVM.
    fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        if options.settings.as_ref().is_some_and(|s| !s.is_empty()) {
            return Err(BrokerError::Unsupported {
                what: "server settings (--config)".into(),
            });
        }
        ManagedPulsar {
            options: options.clone(),
            ..self.clone()
        }
        .up()
    }

    fn client_address(&self, status: &BrokerStatus) -> String {
        format!("pulsar://{}", status.address)
    }

    fn port_rule(&self) -> Option<PortRule> {
        Some(PORT_RULE)
    }

    fn metrics_url(&self) -> Option<String> {
        Some(format!("http://127.0.0.1:{}/metrics/", self.web_port()))
    }

    fn endpoints(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "admin API and metrics: http://127.0.0.1:{}/admin/v2, /metrics/",
                self.web_port()
            ),
            format!(
                "standalone: broker, {} bookie(s), metadata store in one JVM; Pulsar {VERSION} in {}",
                self.running_bookies(),
                self.distribution().display()
            ),
        ];
        if let Some(port) = self.running_tls_port() {
            let url = format!("pulsar+ssl://127.0.0.1:{port}");
            let login = format!("token of the role `{}`, or the client certificate; plain pulsar:// goes on as before", tls::USER);
            let file = DriverFile { name: NAME };
            lines.extend(file.tls_endpoints(&url, &login, &self.tls(), "token"));
        }
        lines
    }

    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let running = (self.daemon.running_pid(), self.running_tls_port().is_some());
        self.tls().switch(NAME, running, on)
    }

    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let web = format!("http://127.0.0.1:{}", self.web_port());
        let file = DriverFile { name: NAME };
        let Some(port) = self.running_tls_port() else {
            let fields = format!(
                "service_url: pulsar://{}\nhttp_url: {web}\n",
                status.address
            );
            return Ok(file.plain("Pulsar", "token authentication", &fields));
        };
        let files = self.tls();
        let (ca, certificate, key) = (
            files.ca().display().to_string(),
            files.client_certificate().display().to_string(),
            files.client_key().display().to_string(),
        );
        let more = format!(
            " Pulsar's TLS authentication instead of the token (the client\n\
             # certificate's common name is the role): remove auth_token and write\n\
             #   tls: {{ca_file: '{ca}', cert_file: '{certificate}', key_file: '{key}'}}"
        );
        let fields = format!(
            "service_url: pulsar+ssl://127.0.0.1:{port}\nhttp_url: {web}\nauth_token: {token}\ntls: {{ca_file: '{ca}'}}\n",
            token = secure::token(&files)?,
        );
        let holds = format!("the token of the role `{}`", tls::USER);
        Ok(file.over_tls("Pulsar over TLS", &holds, &more, &fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_names_our_configuration_as_one_argument() {
        let home = tempfile::tempdir().unwrap();
        let pulsar = ManagedPulsar::new(home.path());
        let command = pulsar.command(1);
        let arguments: Vec<_> = command.get_args().collect();
        assert!(arguments.contains(&pulsar.daemon.config_file().as_os_str()));
        assert_eq!(web_port(DEFAULT_PORT), Some(8080));
    }
}
