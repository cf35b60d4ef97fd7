//! The managed Kafka as the `broker` commands and runs use it (`ManagedBroker`): its
//! addresses, metrics endpoints, TLS switch and the driver file `broker status kafka
//! --driver-file` prints.

use super::*;

impl brokerbench_brokers::ManagedBroker for Kafka {
    fn install(&self) -> Result<String, BrokerError> {
        Kafka::install(self)?;
        Ok(format!(
            "kafka {VERSION} installed in {}",
            self.lib_dir().display()
        ))
    }
    fn up(&self) -> Result<(BrokerStatus, bool), BrokerError> {
        Kafka::up(self)
    }
    fn max_nodes(&self) -> u32 {
        nodes::MAX_NODES
    }
    fn restart_node(&self, id: u32) -> Result<u32, BrokerError> {
        Kafka::restart_node(self, id)
    }
    fn leader(&self, topic: &str) -> Result<u32, BrokerError> {
        self.leader_of(topic)
    }
    fn up_with(&self, options: &UpOptions) -> Result<(BrokerStatus, bool), BrokerError> {
        Kafka::up_with(self, options)
    }
    fn down(&self) -> Result<Option<u32>, BrokerError> {
        Kafka::down(self)
    }
    fn status(&self) -> Result<Option<BrokerStatus>, BrokerError> {
        Kafka::status(self)
    }
    fn port_rule(&self) -> Option<managed::PortRule> {
        Some(PORT_RULE)
    }
    /// Every running node's address: the bootstrap list of a cluster.
    fn client_address(&self, status: &BrokerStatus) -> String {
        let up: Vec<&str> = status
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| n.address.as_str())
            .collect();
        match up.is_empty() {
            true => status.address.clone(),
            false => up.join(","),
        }
    }
    fn metrics_url(&self) -> Option<String> {
        Kafka::metrics_url(self)
    }
    /// Every running node's exporter: each counts the messages of the partitions it leads.
    fn metrics_urls(&self) -> Vec<NodeUrl> {
        self.nodes()
            .iter()
            .filter_map(|node| Some((node.node, Kafka::metrics_url(node)?)))
            .collect()
    }
    fn endpoints(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .metrics_url()
            .map(|url| format!("metrics: {url}"))
            .into_iter()
            .collect();
        lines.extend(self.tls_lines());
        lines
    }
    fn set_tls(&self, on: bool) -> Result<(), BrokerError> {
        self.tls().switch(
            NAME,
            self.running_pid()
                .map(|pid| (pid, self.running_tls_ports().is_some())),
            on,
        )
    }
    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let Some((ssl_port, sasl_port)) = self.running_tls_ports() else {
            return Ok(format!(
                "\
# The managed Kafka's PLAINTEXT listener (`brokerbench broker status kafka --driver-file`).
# Start it with TLS and a SASL user: brokerbench broker down kafka; brokerbench broker up kafka --tls
driver: kafka
bootstrap_servers: {address}
replication_factor: 1
producer_config: {{acks: \"1\"}}
",
                address = status.address
            ));
        };
        let files = self.tls();
        Ok(format!(
            "\
# The managed Kafka's SASL_SSL listener (`brokerbench broker status kafka --driver-file`).
# It holds the password of the user `{user}`: keep it private. brokerbench writes it into no
# result, log or report. With bootstrap_servers set, a run samples the broker's process when
# given --broker-process kafka.Kafka. The SSL listener, with the client certificate instead:
#   bootstrap_servers: 127.0.0.1:{ssl_port}
#   common_config: {{security.protocol: SSL, ssl.ca.location: {ca}, ssl.certificate.location: {certificate}, ssl.key.location: {key}}}
driver: kafka
bootstrap_servers: 127.0.0.1:{sasl_port}
replication_factor: 1
common_config:
  security.protocol: SASL_SSL
  sasl.mechanisms: {DRIVER_FILE_MECHANISM}     # or SCRAM-SHA-256, PLAIN
  sasl.username: {user}
  sasl.password: {password}
  ssl.ca.location: {ca}
producer_config: {{acks: \"1\"}}
",
            user = tls::USER,
            password = files.password()?,
            ca = files.ca().display(),
            certificate = files.client_certificate().display(),
            key = files.client_key().display(),
        ))
    }
}
