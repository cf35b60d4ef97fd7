//! The broker's configuration files: server.properties (with the TLS listeners when on),
//! log4j2.properties and the JMX exporter's rules.

use super::*;

impl Kafka {
    pub(super) fn write_configuration(&self, quorum: &Quorum) -> Result<(), BrokerError> {
        for dir in [self.data_dir(), self.logs_dir()] {
            fs::create_dir_all(&dir).map_err(BrokerError::io("creating", &dir))?;
        }
        let tls = if self.tls().enabled() {
            let files = self.tls();
            files.generate_once()?;
            let mut keystore = Vec::new();
            for part in [files.server_key(), files.server_certificate()] {
                keystore.extend(fs::read(&part).map_err(BrokerError::io("reading", &part))?);
            }
            tls::write_private(&self.keystore_file(), &keystore)?;
            Some(TlsListeners {
                keystore: self.keystore_file(),
                ca: files.ca(),
                password: files.password()?,
            })
        } else {
            None
        };
        let mut properties = server_properties(self.port, &self.data_dir(), tls.as_ref(), quorum);
        properties.push_str(&settings_lines(
            &self.options.settings.clone().unwrap_or_default(),
        ));
        // Private: with TLS on it holds the PLAIN user's password.
        tls::write_private(&self.properties_file(), properties.as_bytes())?;
        process::write_atomically(&self.log4j2_file(), LOG4J2_PROPERTIES.as_bytes())?;
        process::write_atomically(&self.jmx_exporter_config(), JMX_EXPORTER_CONFIG.as_bytes())
    }

    /// Rewrites the exporter's configuration of a running broker when it is not what this
    /// brokerbench reads: the exporter rereads its file when it changes, so a broker started
    /// by an older brokerbench serves the metrics this one expects without a restart.
    pub(super) fn refresh_exporter_config(&self) -> Result<(), BrokerError> {
        let path = self.jmx_exporter_config();
        match fs::read(&path) {
            Ok(current) if current != JMX_EXPORTER_CONFIG.as_bytes() => {
                process::write_atomically(&path, JMX_EXPORTER_CONFIG.as_bytes())
            }
            _ => Ok(()),
        }
    }
}

/// Exporter configuration: only the MBeans brokerbench reads (the full set is ~12,000 lines
/// a scrape), named in lower case. Of the socket server's per-processor metrics only each
/// network thread's cumulative select() wait (`io-wait-time-ns-total`, named without the
/// `_total` the exporter would drop from an untyped sample); the controller's
/// ActiveControllerCount tells a combined node (two request handler pools) apart.
/// NetworkProcessorAvgIdlePercent is not read any more; it stays for brokerbench builds that
/// still read it from a broker this one refreshed.
pub(super) const JMX_EXPORTER_CONFIG: &str = "\
lowercaseOutputName: true
includeObjectNames:
  - \"kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec\"
  - \"kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec\"
  - \"kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent\"
  - \"kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent\"
  - \"kafka.server:type=socket-server-metrics,listener=*,networkProcessor=*\"
  - \"kafka.controller:type=KafkaController,name=ActiveControllerCount\"
  - \"kafka.network:type=RequestChannel,name=RequestQueueSize\"
  - \"kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions\"
  - \"kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount\"
  - \"kafka.server:type=ReplicaManager,name=LeaderCount\"
  - \"kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs\"
rules:
  - pattern: \"kafka.server<type=socket-server-metrics, listener=(.+), networkProcessor=(.+)><>io-wait-time-ns-total\"
    name: kafka_server_socket_server_metrics_io_wait_time_ns
    labels:
      listener: \"$1\"
      networkProcessor: \"$2\"
  - pattern: \"^(?!kafka.server<type=socket-server-metrics).*\"
";

/// `--config` settings as `KEY=VALUE` lines at the end of `server.properties`, where they
/// override what brokerbench wrote above them (the last of a key wins).
pub(super) fn settings_lines(settings: &settings::Settings) -> String {
    if settings.is_empty() {
        return String::new();
    }
    let lines: String = settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    format!("# Server settings (`brokerbench broker up kafka --config KEY=VALUE`).\n{lines}")
}

/// Who a node is in its KRaft quorum: every node is broker and controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Quorum {
    /// This node's id, 1 to N.
    pub(super) node: u32,
    /// Every node's id and controller port, node 1 first.
    pub(super) voters: Vec<(u32, u16)>,
}

impl Quorum {
    /// The one node of a single-node broker, its controller on `port + 1`.
    #[cfg(test)]
    pub(super) fn single(port: u16) -> Quorum {
        Quorum {
            node: 1,
            voters: vec![(1, port + 1)],
        }
    }

    /// Replicas of the internal topics: min(N, 3).
    fn replicas(&self) -> usize {
        self.voters.len().min(3)
    }

    /// Their min.insync.replicas: 2 once there are three replicas, else 1.
    fn min_insync(&self) -> usize {
        if self.replicas() >= 3 {
            2
        } else {
            1
        }
    }

    /// `controller.quorum.voters`: `1@127.0.0.1:P1,2@127.0.0.1:P2,…`.
    fn voters_text(&self) -> String {
        self.voters
            .iter()
            .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `server.properties` for one node of a KRaft cluster (broker and controller in one JVM) on
/// 127.0.0.1: clients on `port`, the controller quorum on `port + 1`; one node by default.
pub(super) fn server_properties(
    port: u16,
    data_dir: &Path,
    tls: Option<&TlsListeners>,
    quorum: &Quorum,
) -> String {
    let controller_port = port + 1;
    let (replicas, min_insync) = (quorum.replicas(), quorum.min_insync());
    let mut properties = format!(
        "\
# Written by brokerbench on every start; edits are overwritten.
process.roles=broker,controller
node.id={node}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs={data_dir}
# Internal topics: as many replicas as there are nodes, three at most.
offsets.topic.replication.factor={replicas}
transaction.state.log.replication.factor={replicas}
transaction.state.log.min.isr={min_insync}
share.coordinator.state.topic.replication.factor={replicas}
share.coordinator.state.topic.min.isr={min_insync}
# Benchmarks create their topics explicitly and delete them afterwards.
auto.create.topics.enable=false
delete.topic.enable=true
num.partitions=1
# Consumers of a fresh group start at once instead of after 3 s.
group.initial.rebalance.delay.ms=0
",
        node = quorum.node,
        voters = quorum.voters_text(),
        data_dir = data_dir.display()
    );
    if let Some(tls) = tls {
        properties = with_tls_listeners(properties, port, controller_port, tls);
    }
    properties
}

/// `properties` with the TLS listeners beside PLAINTEXT on `port` and the controller on
/// `controller_port`: SSL (clients by their certificate) and SASL_SSL (PLAIN and SCRAM
/// logins), with the keystore, CA and PLAIN user of `tls`.
fn with_tls_listeners(
    mut properties: String,
    port: u16,
    controller_port: u16,
    tls: &TlsListeners,
) -> String {
    let ssl_port = port + SSL_PORT_OFFSET;
    let sasl_port = port + SASL_SSL_PORT_OFFSET;
    let user = tls::USER;
    let password = &tls.password;
    properties = replace_value(
        &properties,
        "listeners",
        format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}"),
    );
    properties = replace_value(
        &properties,
        "advertised.listeners",
        format!("PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}"),
    );
    properties = replace_value(
        &properties,
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL".into(),
    );
    properties.push_str(&format!(
        "\
# TLS (`brokerbench broker up kafka --tls`): a throwaway CA's certificate, see tls/.
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
ssl.truststore.type=PEM
ssl.truststore.location={ca}
ssl.client.auth=none
# The SSL listener takes clients by their certificate (mutual TLS, signed by the CA above).
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}=\"{password}\";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
",
        keystore = tls.keystore.display(),
        ca = tls.ca.display()
    ));
    properties
}

/// `properties` with every line that sets `key` setting it to `value` instead, each line
/// ending in a newline.
fn replace_value(properties: &str, key: &str, value: String) -> String {
    properties
        .lines()
        .map(|line| {
            if line.starts_with(&format!("{key}=")) {
                format!("{key}={value}")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// What the TLS listeners need in `server.properties`.
pub(super) struct TlsListeners {
    /// Key and certificate chain, PEM.
    pub(super) keystore: PathBuf,
    /// The CA that signs client certificates the SSL listener takes, PEM.
    pub(super) ca: PathBuf,
    /// The PLAIN user's password (SCRAM credentials are set through the admin API).
    pub(super) password: String,
}

/// The port of the listener `name` (`SSL`, `SASL_SSL`) in a `server.properties`.
pub(super) fn named_listener_port(properties: &str, name: &str) -> Option<u16> {
    let prefix = format!("{name}://");
    properties
        .lines()
        .find_map(|line| line.trim().strip_prefix("listeners="))?
        .split(',')
        .find_map(|listener| listener.trim().strip_prefix(prefix.as_str()))?
        .rsplit_once(':')?
        .1
        .parse()
        .ok()
}

/// The client port of the `PLAINTEXT` listener in a `server.properties`.
pub(super) fn listener_port(properties: &str) -> Option<u16> {
    properties
        .lines()
        .find_map(|line| line.trim().strip_prefix("listeners="))?
        .split(',')
        .find_map(|listener| listener.trim().strip_prefix("PLAINTEXT://"))?
        .rsplit_once(':')?
        .1
        .parse()
        .ok()
}

/// All broker output to one file, `${kafka.logs.dir}/server.log`. The distribution's
/// config splits controller and state-change logs into separate files; for a benchmark
/// broker one file with everything at INFO is easier to read after a failure.
pub(super) const LOG4J2_PROPERTIES: &str = "\
# Written by brokerbench on every start; edits are overwritten.
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = ${sys:kafka.logs.dir}/server.log
appender.server.append = true
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
# Per-request logging would flood the log under benchmark load.
logger.request.name = kafka.request.logger
logger.request.level = WARN
";
