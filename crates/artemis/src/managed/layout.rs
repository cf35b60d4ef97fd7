//! The managed broker's configuration files, written into its folder at each start:
//! `artemis.conf` (the broker's configuration, broker.xml's format: its path on the JVM's
//! command line tells our process apart), `bootstrap.xml`, `login.config`, `management.xml`,
//! `jolokia-access.xml` and `log4j2.properties`.

use std::path::Path;

use brokerbench_brokers::{process, BrokerError};

/// The broker configuration: persistence with the journal in `data`, one acceptor on
/// 127.0.0.1:`port` speaking STOMP (brokerbench's driver) and CORE, AMQP and OpenWire (the
/// peers' tools: `artemis perf client`), security off, addresses and queues created on first
/// use and the addresses removed with their last queue; with `tls` (the TLS acceptor, see
/// [`super::secure`]) that acceptor too and security on.
pub fn broker_xml(port: u16, data: &Path, tls: Option<&str>) -> String {
    let data = data.display();
    let security = tls.is_some();
    let tls_acceptor = tls.unwrap_or("");
    let settings = if security {
        super::secure::SECURITY_SETTINGS
    } else {
        ""
    };
    format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by brokerbench at each start of the managed Artemis; edits are overwritten. -->
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>brokerbench</name>
    <persistence-enabled>true</persistence-enabled>
    <security-enabled>{security}</security-enabled>
    <journal-type>NIO</journal-type>
    <journal-pool-files>10</journal-pool-files>
    <journal-directory>{data}/journal</journal-directory>
    <bindings-directory>{data}/bindings</bindings-directory>
    <paging-directory>{data}/paging</paging-directory>
    <large-messages-directory>{data}/large-messages</large-messages-directory>
    <acceptors>
      <acceptor name="brokerbench">tcp://127.0.0.1:{port}?protocols=STOMP,CORE,AMQP,OPENWIRE</acceptor>
{tls_acceptor}    </acceptors>
{settings}
    <address-settings>
      <address-setting match="#">
        <auto-create-addresses>true</auto-create-addresses>
        <auto-create-queues>true</auto-create-queues>
        <auto-delete-addresses>true</auto-delete-addresses>
      </address-setting>
    </address-settings>
  </core>
</configuration>
"##
    )
}

/// The boot file: JAAS domain `activemq` (which `login.config` lets everyone into, as a
/// guest, while security is off), a broker configuration given on the command line, and the
/// web server on 127.0.0.1:`web_port` with the distribution's management console, whose
/// Jolokia endpoint (`/console/jolokia`) serves the broker's figures to brokerbench.
pub fn bootstrap_xml(web_port: u16) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by brokerbench at each start of the managed Artemis; edits are overwritten. -->
<broker xmlns="http://activemq.apache.org/schema">
   <jaas-security domain="activemq"/>
   <server configuration="file:artemis.conf"/>
   <web path="web">
      <binding name="brokerbench" uri="http://127.0.0.1:{web_port}">
         <app name="console" url="console" war="console.war"/>
      </binding>
   </web>
</broker>
"#
    )
}

const LOGIN: &str = r#"activemq {
   org.apache.activemq.artemis.spi.core.security.jaas.GuestLoginModule required
       org.apache.activemq.jaas.guest.user="brokerbench"
       org.apache.activemq.jaas.guest.role="brokerbench";
};
"#;

const MANAGEMENT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<management-context xmlns="http://activemq.apache.org/schema"/>
"#;

/// The console's Jolokia agent answers reads only (its login is off): no operation, no
/// attribute written, by anything on this machine.
const JOLOKIA_ACCESS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
   <commands>
      <command>read</command>
      <command>list</command>
      <command>search</command>
      <command>version</command>
   </commands>
</restrict>
"#;

/// Warnings and the broker's start and stop lines to standard output (the broker's log).
const LOG4J: &str = "rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d %-5level [%logger] %msg%n
logger.audit.name = org.apache.activemq.audit
logger.audit.level = OFF
";

/// Writes every file but `artemis.conf` (the daemon writes that) into `dir`, the web server
/// on `web_port`; `secure`: the login of a broker with security on.
pub fn write_companions(dir: &Path, web_port: u16, secure: bool) -> Result<(), BrokerError> {
    let login = if secure { super::secure::LOGIN } else { LOGIN };
    for (name, text) in [
        ("bootstrap.xml", bootstrap_xml(web_port).as_str()),
        ("login.config", login),
        ("management.xml", MANAGEMENT),
        ("jolokia-access.xml", JOLOKIA_ACCESS),
        ("log4j2.properties", LOG4J),
    ] {
        process::write_atomically(&dir.join(name), text.as_bytes())?;
    }
    Ok(())
}
