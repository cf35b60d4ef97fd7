//! The managed Kafka as the `broker` commands and runs use it (`ManagedBroker`): its
//! addresses, metrics endpoints, TLS switch and the driver file `broker status kafka
//! --driver-file` prints.

use super::*;
use brokerbench_brokers::driver_file::DriverFile;

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
        let running = (self.running_pid(), self.running_tls_ports().is_some());
        self.tls().switch(NAME, running, on)
    }
    fn driver_file(&self, status: &BrokerStatus) -> Result<String, BrokerError> {
        let file = DriverFile { name: NAME };
        let Some((ssl_port, sasl_port)) = self.running_tls_ports() else {
            let fields = format!(
                "bootstrap_servers: {}\nreplication_factor: 1\nproducer_config: {{acks: \"1\"}}\n",
                status.address
            );
            return Ok(file.plain("Kafka's PLAINTEXT listener", "a SASL user", &fields));
        };
        let (user, files) = (tls::USER, self.tls());
        let ca = files.ca().display().to_string();
        let more = format!(
            " With bootstrap_servers set, a run samples the broker's process when\n\
             # given --broker-process kafka.Kafka. The SSL listener, with the client certificate instead:\n\
             #   bootstrap_servers: 127.0.0.1:{ssl_port}\n\
             #   common_config: {{security.protocol: SSL, ssl.ca.location: {ca}, ssl.certificate.location: {certificate}, ssl.key.location: {key}}}",
            certificate = files.client_certificate().display(),
            key = files.client_key().display(),
        );
        let fields = format!(
            "\
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
            password = files.password()?,
        );
        Ok(file.with_password("Kafka's SASL_SSL listener", user, &more, &fields))
    }
}
