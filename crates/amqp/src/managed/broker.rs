//! The managed RabbitMQ as the CLI and the harness see it ([`ManagedBroker`]): install, up and
//! down, its addresses and metrics endpoints, TLS, and the driver file for it.

use brokerbench_brokers::driver_file::DriverFile;
use brokerbench_brokers::tls;
use brokerbench_brokers::{lifecycle, managed};
use brokerbench_brokers::{BrokerError, BrokerStatus, ManagedBroker, NodeUrl, UpOptions};

use super::names::{NAME, PORT_RULE};
use super::node::RabbitMq;

impl ManagedBroker for RabbitMq {
    fn install(&self) -> Result<String, BrokerError> {
        let bin_dir = self.installed_bin_dir()?;
        let installed = RabbitMq {
            bin_dir: Some(bin_dir),
            ..self.clone()
        };
        Ok(format!(
            "rabbitmq {} is installed (Debian package rabbitmq-server)",
            installed.version()
        ))
    }
    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        RabbitMq::up(self)
    }
    fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        RabbitMq::restart_node(self, id)
    }
    fn leader(&self, queue: &str) -> Result<u32, BrokerError> {
        self.leader_of(queue)
    }
    fn max_nodes(&self) -> u32 {
        brokerbench_brokers::cluster::MAX_NODES
    }
    fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        lifecycle::up(&RabbitMq {
            options: options.clone(),
            ..self.clone()
        })
    }
    fn down(&self) -> Result<Option<u32>, BrokerError> {
        RabbitMq::down(self)
    }
    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        RabbitMq::status(self)
    }
    fn port_rule(&self) -> Option<managed::PortRule> {
        Some(PORT_RULE)
    }
    /// Every running node's URI, node 1's (or the first running one's) first.
    fn client_address(&self, status: &BrokerStatus) -> String {
        let up: Vec<String> = status
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| self.node(n.id).amqp_uri())
            .collect();
        match up.is_empty() {
            true => self.amqp_uri(),
            false => up.join(","),
        }
    }
    fn metrics_url(&self) -> Option<String> {
        Some(format!(
            "http://127.0.0.1:{}/metrics",
            self.prometheus_port()
        ))
    }
    /// Every node's rabbitmq_prometheus endpoint: each counts what its own connections and
    /// queue leaders handled.
    fn metrics_urls(&self) -> Vec<NodeUrl> {
        self.nodes()
            .iter()
            .filter_map(|node| Some((node.node, node.metrics_url()?)))
            .collect()
    }
    fn endpoints(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "management: http://127.0.0.1:{}/  metrics: http://127.0.0.1:{}/metrics",
            self.management_port(),
            self.prometheus_port()
        )];
        lines.extend(self.tls_lines());
        lines
    }
    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        let running = (self.running_pid(), self.running_tls_port().is_some());
        self.tls().switch(NAME, running, on)
    }
    fn driver_file(&self, _status: &BrokerStatus) -> Result<String, BrokerError> {
        let file = DriverFile { name: NAME };
        let Some(tls_port) = self.running_tls_port() else {
            let fields = format!(
                "uri: amqp://guest:guest@127.0.0.1:{}/%2f\n",
                self.amqp_port()
            );
            return Ok(file.plain("RabbitMQ's AMQP listener", "a user of its own", &fields));
        };
        let password = self.tls().password()?;
        let more = format!(
            " With the uri set, a run samples the broker's process when given\n\
             # --broker-process beam.smp. To log in with the client certificate (SASL EXTERNAL) instead:\n\
             # uri: {}",
            self.tls_uri(tls_port, "", true)
        );
        let fields = format!("uri: {}\n", self.tls_uri(tls_port, &password, false));
        let what = "RabbitMQ's amqps:// listener";
        Ok(file.with_password(what, tls::USER, &more, &fields))
    }
}
