//! The broker's JVM: the `java` command line it shares with the broker's tools, and the
//! broker started detached with its output at the end of the broker log.

use super::*;

impl Kafka {
    /// `java` with the JVM options shared by the broker and its tools.
    pub(super) fn java_command(&self, heap: &str) -> Command {
        let mut java = Command::new(java_program());
        java.arg(format!("-Xms{heap}"))
            .arg(format!("-Xmx{heap}"))
            .args(["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"])
            .arg("-Djava.awt.headless=true")
            .arg(concat_os("-Dkafka.logs.dir=", &self.logs_dir()))
            .arg(concat_os(
                "-Dlog4j2.configurationFile=",
                &self.log4j2_file(),
            ))
            .arg("-cp")
            // The JVM expands `dir/*` itself: no shell involved.
            .arg(concat_os("", &self.lib_dir().join("*")))
            .current_dir(self.dir());
        java
    }

    /// The broker's command line: `java … kafka.Kafka <dir>/server.properties`.
    pub(super) fn broker_command(&self) -> Command {
        let mut broker = self.java_command(&self.heap);
        if let Some(agent) = self.agent_argument() {
            broker.arg(agent);
        }
        broker.arg(MAIN_CLASS).arg(self.properties_file());
        broker
    }

    /// Sends a command's stdout and stderr to the end of the broker log.
    pub(super) fn redirect_to_log(&self, command: &mut Command) -> Result<(), BrokerError> {
        let path = self.log_file();
        process::output_to(command, &path).map_err(BrokerError::io("opening", &path))
    }

    pub(super) fn spawn_broker(&self) -> Result<Child, BrokerError> {
        let mut broker = self.broker_command();
        self.redirect_to_log(&mut broker)?;
        process::spawn_detached(&mut broker).map_err(|source| self.java_not_found(source))
    }

    pub(super) fn java_not_found(&self, source: std::io::Error) -> BrokerError {
        BrokerError::JavaNotFound {
            program: java_program(),
            source,
        }
    }
}

/// `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from PATH.
fn java_program() -> PathBuf {
    match std::env::var_os("JAVA_HOME").filter(|home| !home.is_empty()) {
        Some(home) => Path::new(&home).join("bin/java"),
        None => PathBuf::from("java"),
    }
}
