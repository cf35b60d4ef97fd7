//! The managed MQTT broker: Debian's `mosquitto` (not the system service), one broker whose
//! configuration, persistence file and log live in the broker folder, listening on
//! 127.0.0.1:`BROKERBENCH_MQTT_PORT` (default 1883, MQTT's own, so OpenMessaging Benchmark
//! driver files name it unchanged), its `$SYS` figures published every second; with `--tls`,
//! a TLS listener and a user beside it (see [`secure`]). Its lifecycle is the one of every
//! packaged broker ([`Packaged`]).

mod layout;
mod secure;

use std::path::Path;
use std::time::Duration;

use brokerbench_brokers::packaged::{Folder, Package, Packaged, Spec};
use brokerbench_brokers::BrokerError;

static SPEC: Spec = Spec {
    name: "mqtt",
    port_variable: "BROKERBENCH_MQTT_PORT",
    default_port: 1883,
    program: "mosquitto",
    package: "mosquitto",
    service: Some("mosquitto"),
    version_argument: "-h",
    version_after: "version ",
    config_flag: Some("-c"),
    port_of: layout::port_of,
    tls_port_of: secure::tls_port,
    scheme: "mqtt",
    tls_scheme: "mqtts",
    title: "MQTT broker",
    url_field: "mqtt_url",
    tls_login: "user `{user}` only; the plain listener stays anonymous",
    stop_grace: Duration::from_secs(5),
};

/// The managed MQTT broker.
pub type ManagedMqtt = Packaged<MosquittoPackage>;

/// The managed MQTT broker in the home `home`.
pub fn managed(home: &Path) -> ManagedMqtt {
    Packaged::new(home, MosquittoPackage)
}

/// What the managed MQTT broker is.
#[derive(Debug, Clone, Copy)]
pub struct MosquittoPackage;

impl Package for MosquittoPackage {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn configuration(
        &self,
        folder: &Folder,
        port: u16,
        tls_port: Option<u16>,
    ) -> Result<String, BrokerError> {
        let root = layout::running_as_root();
        let mut text = layout::mosquitto_conf(port, &folder.data_dir, root);
        if let Some(tls_port) = tls_port {
            let passwords = secure::write_passwords(&folder.tls, &folder.program)?;
            text += &secure::tls_lines(&folder.tls, tls_port, &passwords);
        }
        Ok(text)
    }

    /// Whether a broker on 127.0.0.1:`port` accepts an MQTT connection.
    fn answers(&self, port: u16) -> bool {
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

    fn endpoints(&self, folder: &Folder, port: u16) -> Vec<String> {
        vec![
            format!(
                "persistence: {}/mosquitto.db, saved when the broker stops (and every 30 minutes): a killed broker loses what came since",
                folder.data_dir.display()
            ),
            format!(
                "$SYS/# every 2 s; mosquitto_sub -p {port} -t '$SYS/#' -v shows it; one broker (bridges are not managed)"
            ),
        ]
    }
}
