//! The node's programs: `rabbitmq-server` and `rabbitmqctl` with the environment they share,
//! and stopping the node with `rabbitmqctl stop`, then signals.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use brokerbench_brokers::{process, BrokerError};

use super::names::*;
use super::node::RabbitMq;
use super::ports::node_name;

impl RabbitMq {
    /// The environment the node and our `rabbitmqctl` calls share: nothing of the caller's
    /// but PATH and the locale, HOME = our folder (for the cookie), our node name and an
    /// empty `rabbitmq-env.conf`.
    fn base_command(&self, program: PathBuf, port: u16) -> Command {
        let mut command = Command::new(program);
        command.env_clear();
        for name in ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        if std::env::var_os("PATH").is_none() {
            command.env(
                "PATH",
                "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
            );
        }
        command
            .env("HOME", self.dir())
            .env("RABBITMQ_CONF_ENV_FILE", self.env_file())
            .env("RABBITMQ_NODENAME", node_name(port))
            // An epmd that the node or the CLI has to start listens on loopback only.
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            // rabbitmqctl is an Erlang node too: its distribution listener on loopback only.
            .env("RABBITMQ_CTL_ERL_ARGS", CTL_ERL_ARGS)
            .current_dir(self.dir());
        command
    }

    /// `rabbitmq-server -kernel inet_dist_use_interface {127,0,0,1} -brokerbench_dir <dir>`
    /// with every path pointing into our folder.
    pub(super) fn server_command(&self, bin_dir: &Path, port: u16) -> Command {
        let mut server = self.base_command(bin_dir.join(SERVER), port);
        let dir = self.dir();
        server
            .env("RABBITMQ_BASE", &dir)
            .env("RABBITMQ_CONFIG_FILE", self.config_file())
            // Neither /etc/rabbitmq/conf.d nor /etc/rabbitmq/advanced.config: files that do
            // not exist in our folder.
            .env("RABBITMQ_CONFIG_FILES", dir.join("conf.d"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", self.plugins_file())
            .env("RABBITMQ_MNESIA_BASE", self.mnesia_base())
            .env("RABBITMQ_LOG_BASE", self.logs_dir())
            .env("RABBITMQ_LOGS", self.log_file())
            .env("RABBITMQ_PID_FILE", self.pid_file())
            .env(
                "RABBITMQ_DIST_PORT",
                (port + DISTRIBUTION_OFFSET).to_string(),
            )
            .env("ERL_CRASH_DUMP", self.logs_dir().join("erl_crash.dump"))
            // The start script hands its arguments to erl unchanged (no word splitting).
            .args(["-kernel", "inet_dist_use_interface", "{127,0,0,1}"])
            .arg(OWNERSHIP_FLAG)
            .arg(&dir);
        server
    }

    /// `rabbitmqctl -n NODE ARGS...` with the node's HOME (cookie), output to the startup log.
    pub(super) fn ctl_command(
        &self,
        bin_dir: &Path,
        port: u16,
        arguments: &[&str],
    ) -> io::Result<Command> {
        let mut ctl = self.base_command(bin_dir.join(CTL), port);
        ctl.arg("-n").arg(node_name(port)).args(arguments);
        process::output_to(&mut ctl, &self.startup_log())?;
        Ok(ctl)
    }

    pub(super) fn spawn_server(&self, bin_dir: &Path, port: u16) -> Result<Child, BrokerError> {
        let log = self.startup_log();
        let mut server = self.server_command(bin_dir, port);
        process::output_to(&mut server, &log).map_err(BrokerError::io("opening", &log))?;
        process::spawn_detached(&mut server).map_err(|source| BrokerError::Io {
            action: "starting",
            path: bin_dir.join(SERVER),
            source,
        })
    }

    /// `rabbitmqctl stop`, the documented clean shutdown; then SIGTERM (which RabbitMQ also
    /// treats as a clean shutdown) and SIGKILL when the node does not go.
    pub(super) fn stop_node(&self, pid: u32) -> Result<(), BrokerError> {
        let state = self.read_state();
        let stopped_by_ctl = match (&self.bin_dir, &state) {
            (Some(bin_dir), Some(state)) => {
                let stopped = self
                    .ctl_command(bin_dir, state.port, &["stop"])
                    .and_then(|mut ctl| process::run_with_timeout(&mut ctl, CTL_STOP_TIMEOUT));
                matches!(stopped, Ok(Some(status)) if status.success())
                    && process::wait_for_exit(pid, STOP_GRACE)
            }
            _ => false,
        };
        if !stopped_by_ctl {
            // `rabbitmqctl stop` failed (no state, a cookie mismatch, a hung node): signals.
            process::stop(NAME, pid, STOP_GRACE)?;
        }
        // The start script exits right after the node. When this process started it (a test,
        // or a run that started the broker itself), reap it so it does not stay a zombie.
        if let Some(script) = state.and_then(|state| state.script_pid) {
            let script_arguments = [OsString::from(OWNERSHIP_FLAG), self.dir().into_os_string()];
            if process::is_ours(script, &script_arguments) {
                process::wait_for_exit(script, Duration::from_secs(5));
            }
            process::reap(script);
        }
        Ok(())
    }
}
