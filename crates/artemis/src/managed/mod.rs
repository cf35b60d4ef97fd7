//! The managed Artemis: the release brokerbench pins (see [`install`]), fetched on first use,
//! one broker (no clusters yet) whose configuration, journal and log live in the broker
//! folder, listening on 127.0.0.1:`BROKERBENCH_ARTEMIS_PORT` (default 61616, Artemis's own,
//! so OpenMessaging Benchmark driver files name it unchanged), with its management console,
//! whose Jolokia endpoint brokerbench reads the broker's figures from, on that port + 1000.

mod install;
mod layout;
mod secure;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use brokerbench_brokers::daemon::{self, Daemon};
use brokerbench_brokers::driver_file::DriverFile;
use brokerbench_brokers::managed::{PortRule, PortSetting};
use brokerbench_brokers::one_process::OneProcess;
use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{BrokerError, BrokerStatus, ManagedBroker};

use install::RELEASE;
pub use install::VERSION;

const NAME: &str = "artemis";
const DEFAULT_PORT: u16 = 61616;
/// The management console (the web server) listens on the acceptor's port + this.
const WEB_OFFSET: u16 = 1000;
const PORT_RULE: PortRule = PortRule::above(
    NAME,
    "BROKERBENCH_ARTEMIS_PORT",
    DEFAULT_PORT,
    &[0, secure::TLS_OFFSET, WEB_OFFSET],
    "the management console listens on the port + 1000",
);
const MAIN_CLASS: &str = "org.apache.activemq.artemis.boot.Artemis";
/// The broker's heap: Artemis pages an address to disk when it holds more than half of it.
const HEAP: &str = "-Xmx1G";

#[derive(Clone)]
pub struct ManagedArtemis {
    daemon: Daemon,
    port: PortSetting,
}

impl ManagedArtemis {
    pub fn new(home: &Path) -> Self {
        ManagedArtemis {
            daemon: Daemon::new(NAME, home),
            port: PORT_RULE.setting(),
        }
    }

    fn port(&self) -> Result<u16, BrokerError> {
        self.port.checked()
    }

    /// The port the running broker was started on (its configuration), else this handle's.
    fn running_port(&self) -> u16 {
        std::fs::read_to_string(self.daemon.config_file())
            .ok()
            .and_then(|text| acceptor_port(&text))
            .unwrap_or(self.port.or_default())
    }

    /// The broker's JVM: our configuration file is one of its arguments.
    fn command(&self) -> Command {
        let dir = &self.daemon.dir;
        let home = self.distribution();
        let mut command = Command::new(java_program());
        command
            .arg("-Xms256M")
            .arg(HEAP)
            .arg("-XX:+UseG1GC")
            .arg(define(
                "java.security.auth.login.config",
                &dir.join("login.config"),
            ))
            .arg(define(
                "log4j2.configurationFile",
                &dir.join("log4j2.properties"),
            ))
            .arg(define("artemis.home", &home))
            .arg(define("artemis.instance", dir))
            .arg(define("artemis.instance.etc", dir))
            .arg(define("data.dir", &self.daemon.data_dir()))
            .arg(define("java.io.tmpdir", &self.daemon.data_dir()))
            // The console's login is off (the broker's security is too, unless --tls):
            // loopback only, and its Jolokia agent answers reads only.
            .arg("-Dhawtio.authenticationEnabled=false")
            .arg(format!(
                "-Djolokia.policyLocation=file:{}",
                dir.join("jolokia-access.xml").display()
            ))
            .arg("-Dhawtio.offline=true")
            .arg("-classpath")
            .arg(self.boot_jar())
            .arg(MAIN_CLASS)
            .args(["run", "--broker"])
            .arg(self.daemon.config_file())
            .arg(format!("xml:{}", dir.join("bootstrap.xml").display()));
        command
    }

    /// Starts the broker with a new configuration on the port setting's port (and its TLS
    /// acceptor, security on, when TLS is on).
    fn spawn(&self) -> Result<Child, BrokerError> {
        let port = self.port()?;
        let tls = match self.tls().enabled() {
            true => Some(secure::acceptor(&self.tls(), port + secure::TLS_OFFSET)?),
            false => None,
        };
        let text = layout::broker_xml(port, &self.daemon.data_dir(), tls.as_deref());
        self.spawn_with(port, &text)
    }

    /// The TLS material and whether TLS is on for the next start (see [`TlsFiles`]).
    pub fn tls(&self) -> TlsFiles {
        TlsFiles::of(&self.daemon.dir)
    }

    /// The TLS acceptor's port of the running broker, when it was started with TLS.
    fn running_tls_port(&self) -> Option<u16> {
        let text = std::fs::read_to_string(self.daemon.config_file()).ok()?;
        secure::tls_port(&text)
    }

    /// Starts the broker with the configuration `text`, which listens on `port` (and its TLS
    /// port, when it names one).
    fn spawn_with(&self, port: u16, text: &str) -> Result<Child, BrokerError> {
        self.daemon.wait_previous_exit();
        let web = web_port(port).ok_or_else(|| PORT_RULE.out_of_range(port))?;
        let tls_port = secure::tls_port(text);
        for port in [Some(port), Some(web), tls_port].into_iter().flatten() {
            if !daemon::can_listen(port) {
                return Err(BrokerError::PortInUse {
                    broker: NAME,
                    port,
                    dir: self.daemon.dir.clone(),
                    variable: PORT_RULE.variable,
                    needs: "<port>, <port>+1 with --tls, and <port>+1000 (management console)",
                });
            }
        }
        std::fs::create_dir_all(&self.daemon.dir)
            .map_err(BrokerError::io("creating", &self.daemon.dir))?;
        layout::write_companions(&self.daemon.dir, web, tls_port.is_some())?;
        if tls_port.is_some() {
            secure::write_users(&self.daemon.dir, &self.tls())?;
        }
        self.daemon.spawn(text, self.command())
    }

    /// Waits for the management console, which starts after the broker, until its Jolokia
    /// endpoint answers, so that a run's first scrape finds it ready: the first request loads
    /// the Jolokia agent (3.5 s once with a core busy, longer than a scrape's 2-s timeout, and
    /// a 2-s run right after a kill's restart had no broker metrics). One that does not come is
    /// said, not fatal (the broker works, its metrics are missing).
    fn wait_console(&self) {
        let Some(web) = web_port(self.running_port()) else {
            return;
        };
        let answered = brokerbench_brokers::managed::poll(self.daemon.start_timeout, || {
            brokerbench_brokers::http::get(web, JOLOKIA_VERSION, None, Duration::from_secs(10))
        });
        if answered.is_none() {
            eprintln!(
                "warning: Artemis's management console did not answer on 127.0.0.1:{web}{JOLOKIA_VERSION} within {:?}: runs will have no broker metrics (see {})",
                self.daemon.start_timeout,
                self.daemon.log_file().display()
            );
        }
    }
}

/// The console's Jolokia request that costs the broker least (its agent's version).
const JOLOKIA_VERSION: &str = "/console/jolokia/version";

/// The management console's port for the broker's `port` (None past 65535: a configuration
/// written before the console was).
fn web_port(port: u16) -> Option<u16> {
    port.checked_add(WEB_OFFSET)
}

/// `-Dname=path`.
fn define(name: &str, path: &Path) -> String {
    format!("-D{name}={}", path.display())
}

/// `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from PATH.
fn java_program() -> PathBuf {
    match std::env::var_os("JAVA_HOME").filter(|home| !home.is_empty()) {
        Some(home) => Path::new(&home).join("bin/java"),
        None => PathBuf::from("java"),
    }
}

/// The port of the acceptor a configuration names.
fn acceptor_port(configuration: &str) -> Option<u16> {
    let at = configuration.find("tcp://127.0.0.1:")? + "tcp://127.0.0.1:".len();
    let digits: String = configuration[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether a broker on 127.0.0.1:`port` answers a STOMP CONNECT.
fn answers(port: u16) -> bool {
    let url = crate::config::ArtemisUrl::parse(&format!("tcp://127.0.0.1:{port}"))
        .expect("a loopback URL parses");
    crate::conn::Conn::connect(&url, Duration::from_secs(1), None).is_ok()
}

impl OneProcess for ManagedArtemis {
    fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    fn check(&self) -> Result<(), BrokerError> {
        self.port()?;
        RELEASE.check_installed(&self.daemon.dir)
    }

    fn status_of(&self, pid: u32) -> BrokerStatus {
        let address = format!("127.0.0.1:{}", self.running_port());
        self.daemon.status_of(pid, address, VERSION.to_string())
    }

    fn answers(&self) -> bool {
        answers(self.running_port())
    }

    fn start(&self) -> Result<Child, BrokerError> {
        self.spawn()
    }

    fn start_with(&self, text: &str) -> Result<Child, BrokerError> {
        self.spawn_with(self.running_port(), text)
    }

    /// As a start does, a restart waits for the console too: the next run's broker metrics
    /// come from it, and it answers after the acceptor (a run right after a kill's restart
    /// once had none).
    fn wait_started(&self, child: &mut Child) -> Result<(), BrokerError> {
        let port = self.running_port();
        self.daemon.wait(child, || answers(port))?;
        self.wait_console();
        Ok(())
    }
}

impl ManagedBroker for ManagedArtemis {
    brokerbench_brokers::lifecycle_commands!(installs RELEASE);

    fn client_address(&self, status: &BrokerStatus) -> String {
        format!("tcp://{}", status.address)
    }

    fn port_rule(&self) -> Option<PortRule> {
        Some(PORT_RULE)
    }

    fn metrics_url(&self) -> Option<String> {
        let web = web_port(self.running_port())?;
        Some(format!("http://127.0.0.1:{web}/console/jolokia"))
    }

    fn endpoints(&self) -> Vec<String> {
        let protocols = format!(
            "protocols: STOMP (brokerbench), CORE, AMQP, OpenWire on that port; Artemis {VERSION} in {}",
            self.distribution().display()
        );
        let console = web_port(self.running_port()).map(|web| {
            format!("management console: http://127.0.0.1:{web}/console (Jolokia, reads only: /console/jolokia)")
        });
        let mut lines: Vec<String> = std::iter::once(protocols).chain(console).collect();
        if let Some(port) = self.running_tls_port() {
            let url = format!("ssl://127.0.0.1:{port}");
            let login = format!(
                "user `{}`, or no login as a guest; plain tcp:// goes on as before",
                tls::USER
            );
            let file = DriverFile { name: NAME };
            lines.extend(file.tls_endpoints(&url, &login, &self.tls(), "password"));
        }
        lines
    }

    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let running = (self.daemon.running_pid(), self.running_tls_port().is_some());
        self.tls().switch(NAME, running, on)
    }

    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let files = self.tls();
        let tls = self.running_tls_port().map(|port| (port, &files));
        DriverFile { name: NAME }.one_url(
            ("Artemis", "broker_address"),
            ["tcp", "ssl"],
            &status.address,
            tls,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acceptor_port_is_read_back_from_the_configuration() {
        let text = layout::broker_xml(61999, Path::new("/tmp/x/data"), None);
        assert_eq!(acceptor_port(&text), Some(61999));
        assert!(text.contains("<journal-directory>/tmp/x/data/journal</journal-directory>"));
    }

    #[test]
    fn the_jvm_names_our_configuration_as_one_argument() {
        let home = tempfile::tempdir().unwrap();
        let artemis = ManagedArtemis::new(home.path());
        let command = artemis.command();
        let arguments: Vec<_> = command.get_args().collect();
        assert!(arguments.contains(&artemis.daemon.config_file().as_os_str()));
        assert!(arguments.contains(&std::ffi::OsStr::new(MAIN_CLASS)));
    }
}
