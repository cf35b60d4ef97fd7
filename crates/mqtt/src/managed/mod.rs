//! The managed MQTT broker: Debian's `mosquitto` (not the system service), one broker whose
//! configuration, persistence file and log live in the broker folder, listening on
//! 127.0.0.1:`BROKERBENCH_MQTT_PORT` (default 1883, MQTT's own, so OpenMessaging Benchmark
//! driver files name it unchanged), its `$SYS` figures published every second; with `--tls`,
//! a TLS listener and a user beside it (see [`secure`]). Its lifecycle is the one of every
//! packaged broker ([`Packaged`]).

mod layout;
mod secure;

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use brokerbench_brokers::packaged::{Folder, Package, Packaged, Spec};
use brokerbench_brokers::tls;
use brokerbench_brokers::BrokerError;

static SPEC: Spec = Spec {
    name: "mqtt",
    port_variable: "BROKERBENCH_MQTT_PORT",
    default_port: 1883,
    program: "mosquitto",
    package: "mosquitto",
    service: Some("mosquitto"),
    version_argument: "-h",
    scheme: "mqtt",
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

    fn version_of(&self, answer: &str) -> Option<String> {
        layout::version_of(answer)
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

    fn port_of(&self, configuration: &str) -> Option<u16> {
        layout::port_of(configuration)
    }

    fn tls_port_of(&self, configuration: &str) -> Option<u16> {
        secure::tls_port(configuration)
    }

    fn arguments(&self, configuration: &Path) -> Vec<OsString> {
        vec!["-c".into(), configuration.into()]
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

    fn endpoints(&self, folder: &Folder, port: u16, tls_port: Option<u16>) -> Vec<String> {
        let mut lines = vec![
            format!(
                "persistence: {}/mosquitto.db, saved when the broker stops (and every 30 minutes): a killed broker loses what came since",
                folder.data_dir.display()
            ),
            format!(
                "$SYS/# every 2 s; mosquitto_sub -p {port} -t '$SYS/#' -v shows it; one broker (bridges are not managed)"
            ),
        ];
        if let Some(port) = tls_port {
            lines.push(format!(
                "TLS:  mqtts://127.0.0.1:{port} (user `{}` only; the plain listener stays anonymous)",
                tls::USER
            ));
            lines.push(format!("CA:   {}", folder.tls.ca().display()));
            lines.push("`brokerbench broker status mqtt --driver-file > mqtt-tls.yaml` writes a driver file for it (it holds the password)".into());
        }
        lines
    }

    fn driver_file(
        &self,
        folder: &Folder,
        address: &str,
        tls_port: Option<u16>,
    ) -> Result<String, BrokerError> {
        let Some(port) = tls_port else {
            return Ok(format!(
                "\
# The managed MQTT broker (`brokerbench broker status mqtt --driver-file`).
# Start it with TLS and a user: brokerbench broker down mqtt; brokerbench broker up mqtt --tls
driver: mqtt
mqtt_url: mqtt://{address}
"
            ));
        };
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
            password = folder.tls.password()?,
            ca = folder.tls.ca().display(),
        ))
    }
}
