//! Starting a node: the configuration and cookie its folder gets, the port it takes and its
//! start script; and taking down a node whose start failed.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;

use brokerbench_brokers::{process, BrokerError};

use super::files::{rabbitmq_conf, random_cookie, settings_lines, State, ENV_CONF, RANDOM};
use super::names::*;
use super::node::RabbitMq;
use super::ports::{choose_port, last_candidate, moved_note};

impl RabbitMq {
    fn write_configuration(&self, port: u16) -> Result<(), BrokerError> {
        for dir in [self.logs_dir(), self.mnesia_base()] {
            fs::create_dir_all(&dir).map_err(BrokerError::io("creating", &dir))?;
        }
        let files = self.tls();
        let tls = files.enabled();
        if tls {
            files.generate_once()?;
        }
        let mut conf = rabbitmq_conf(port, tls.then_some(&files));
        conf.push_str(&settings_lines(
            &self.options.settings.clone().unwrap_or_default(),
        ));
        process::write_atomically(&self.config_file(), conf.as_bytes())?;
        process::write_atomically(
            &self.plugins_file(),
            if tls { PLUGINS_TLS } else { PLUGINS }.as_bytes(),
        )?;
        process::write_atomically(&self.env_file(), ENV_CONF.as_bytes())?;
        self.ensure_cookie()
    }

    /// Creates the node's Erlang cookie once (20 random capital letters, like Erlang's own),
    /// readable by the owner only: Erlang refuses a cookie file others can read.
    pub(super) fn ensure_cookie(&self) -> Result<(), BrokerError> {
        let path = self.cookie_file();
        if !path.is_file() || self.node > 1 {
            // The nodes of a cluster share node 1's cookie: Erlang lets in only those.
            let cookie = match self.node {
                1 => random_cookie().map_err(BrokerError::io("reading", Path::new(RANDOM)))?,
                _ => {
                    let first = self.root().join(".erlang.cookie");
                    fs::read_to_string(&first).map_err(BrokerError::io("reading", &first))?
                }
            };
            let mut temporary = path.as_os_str().to_owned();
            temporary.push(".tmp");
            let temporary = PathBuf::from(temporary);
            fs::write(&temporary, &cookie).map_err(BrokerError::io("writing", &temporary))?;
            fs::set_permissions(&temporary, fs::Permissions::from_mode(0o400))
                .map_err(BrokerError::io("restricting", &temporary))?;
            fs::rename(&temporary, &path).map_err(BrokerError::io("renaming to", &path))?;
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(0o400))
            .map_err(BrokerError::io("restricting", &path))
    }

    /// Writes this node's configuration and spawns its start script: the script (the node's
    /// parent; it exits when the node does) and the AMQP port it took.
    pub(super) fn start_node(&self) -> Result<(Child, u16), BrokerError> {
        let bin_dir = self.installed_bin_dir()?;
        // A killed node still winding down holds its ports: wait for it rather than move on
        // to the next free port.
        process::wait_if_exiting(&self.pid_file());
        let (port, skipped) = choose_port(self.port, self.tls().enabled(), |port| {
            !process::can_listen(port)
        })
        .map_err(|busy| BrokerError::NoFreePort {
            broker: NAME,
            first: self.port,
            last: last_candidate(self.port),
            busy: busy
                .iter()
                .map(|busy| busy.describe())
                .collect::<Vec<_>>()
                .join(", "),
            variable: PORT_VARIABLE,
        })?;
        let note = skipped.first().map(|busy| moved_note(busy, port));
        self.write_configuration(port)?;
        process::rotate_log(&self.startup_log())?;
        process::rotate_log(&self.log_file())?;
        // A pid file left by a node that died would name a stranger (or nobody) while we wait.
        process::remove_pid_file(&self.pid_file())?;
        let script = self.spawn_server(&bin_dir, port)?;
        self.write_state(&State {
            port,
            note,
            script_pid: Some(script.id()),
        })?;
        Ok((script, port))
    }

    /// Takes a node that failed to start down and removes what its start left.
    pub(super) fn abandon_node(&self, mut script: Child) {
        if let Some(pid) = self.running_pid() {
            let _ = process::stop(NAME, pid, STOP_GRACE);
        }
        let _ = script.kill();
        let _ = script.wait();
        let _ = process::remove_if_present(&self.state_file());
        let _ = process::remove_pid_file(&self.pid_file());
    }
}
