//! The managed Redis: Debian's `redis-server` (not the system service), one server whose
//! configuration, data (the append-only file) and log live in the broker folder, listening on
//! 127.0.0.1:`BROKERBENCH_REDIS_PORT` (default 6379, Redis's own, so OpenMessaging Benchmark
//! driver files name it unchanged), with the append-only file on and fsync every second
//! (Redis's own default once AOF is on; a driver file's `appendfsync` changes it for a run);
//! with `--tls`, a TLS port and a user beside it (see [`secure`]). Its lifecycle is the one of
//! every packaged broker ([`Packaged`]).

mod layout;
mod secure;

use std::path::Path;
use std::time::Duration;

use brokerbench_brokers::packaged::{Folder, Package, Packaged, Spec};
use brokerbench_brokers::BrokerError;

static SPEC: Spec = Spec {
    name: "redis",
    port_variable: "BROKERBENCH_REDIS_PORT",
    default_port: 6379,
    program: "redis-server",
    package: "redis-server",
    service: Some("redis-server"),
    version_argument: "--version",
    version_after: "v=",
    config_flag: None,
    port_of: layout::port_of,
    tls_port_of: secure::tls_port,
    scheme: "redis",
    tls_scheme: "rediss",
    title: "Redis",
    url_field: "redis_url",
    tls_login: "user `{user}`, or no login as the default user; plain redis:// goes on as before",
    stop_grace: Duration::from_secs(10),
};

/// The managed Redis.
pub type ManagedRedis = Packaged<RedisPackage>;

/// The managed Redis in the home `home`.
pub fn managed(home: &Path) -> ManagedRedis {
    Packaged::new(home, RedisPackage)
}

/// What the managed Redis is.
#[derive(Debug, Clone, Copy)]
pub struct RedisPackage;

impl Package for RedisPackage {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn configuration(
        &self,
        folder: &Folder,
        port: u16,
        tls_port: Option<u16>,
    ) -> Result<String, BrokerError> {
        let mut text = layout::redis_conf(port, &folder.data_dir);
        if let Some(tls_port) = tls_port {
            text += &secure::tls_lines(&folder.tls, tls_port)?;
        }
        Ok(text)
    }

    /// Whether a server on 127.0.0.1:`port` answers PING (not while it loads its data).
    fn answers(&self, port: u16) -> bool {
        let url = crate::config::RedisUrl::parse(&format!("redis://127.0.0.1:{port}"))
            .expect("a loopback URL parses");
        crate::conn::Conn::connect(&url, Duration::from_secs(1)).is_ok()
    }

    fn endpoints(&self, folder: &Folder, port: u16) -> Vec<String> {
        vec![
            format!(
                "persistence: append-only file, appendfsync everysec (a driver file's appendfsync sets it for a run); data in {}",
                folder.data_dir.display()
            ),
            format!(
                "redis-cli -p {port} opens a shell on it; one server (Redis Cluster and replicas are not managed)"
            ),
        ]
    }
}
