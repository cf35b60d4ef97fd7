//! TLS and a user on the managed Artemis (`brokerbench broker up artemis --tls`): a second
//! acceptor on the port + 1 (61617 by default) speaking the same protocols over TLS with the
//! home's throwaway certificates (see `brokerbench_brokers::tls`), and the broker's security
//! switched on with one user, `brokerbench`, whose password is the home's. Clients that give
//! no login still connect, on either acceptor, as a guest with the same rights, so plain runs
//! go on beside TLS ones; a login that is given must be right.

use std::path::{Path, PathBuf};

use brokerbench_brokers::tls::{self, TlsFiles};
use brokerbench_brokers::{process, BrokerError};

/// The comment that marks a configuration started with TLS.
pub const TLS_MARK: &str = "<!-- TLS and a user: brokerbench broker up artemis with tls -->";
/// The TLS acceptor listens on the plain acceptor's port + this.
pub const TLS_OFFSET: u16 = 1;

/// The TLS acceptor on `port`, writing the key store it reads (the server's key and
/// certificate in one PEM file, 0600) anew, so that it is always the home's material.
pub fn acceptor(files: &TlsFiles, port: u16) -> Result<String, BrokerError> {
    files.generate_once()?;
    let store = key_store(files);
    let read =
        |path: PathBuf| std::fs::read_to_string(&path).map_err(BrokerError::io("reading", &path));
    let pem = read(files.server_key())? + &read(files.server_certificate())?;
    tls::write_private(&store, pem.as_bytes())?;
    Ok(format!(
        "      {TLS_MARK}\n      <acceptor name=\"brokerbench-tls\">tcp://127.0.0.1:{port}?protocols=STOMP,CORE,AMQP,OPENWIRE;sslEnabled=true;keyStoreType=PEM;keyStorePath={}</acceptor>\n",
        store.display()
    ))
}

/// Every right on every address for the role `brokerbench` (the user's and the guest's).
pub const SECURITY_SETTINGS: &str = r##"    <security-settings>
      <security-setting match="#">
        <permission type="send" roles="brokerbench"/>
        <permission type="consume" roles="brokerbench"/>
        <permission type="browse" roles="brokerbench"/>
        <permission type="createAddress" roles="brokerbench"/>
        <permission type="deleteAddress" roles="brokerbench"/>
        <permission type="createDurableQueue" roles="brokerbench"/>
        <permission type="deleteDurableQueue" roles="brokerbench"/>
        <permission type="createNonDurableQueue" roles="brokerbench"/>
        <permission type="deleteNonDurableQueue" roles="brokerbench"/>
        <permission type="manage" roles="brokerbench"/>
      </security-setting>
    </security-settings>
"##;

/// JAAS: the user from `artemis-users.properties`, else a guest — unless a login was given
/// (`credentialsInvalidate`), so a wrong password is refused rather than let in as a guest.
pub const LOGIN: &str = r#"activemq {
   org.apache.activemq.artemis.spi.core.security.jaas.PropertiesLoginModule sufficient
       reload=false
       org.apache.activemq.jaas.properties.user="artemis-users.properties"
       org.apache.activemq.jaas.properties.role="artemis-roles.properties";
   org.apache.activemq.artemis.spi.core.security.jaas.GuestLoginModule sufficient
       org.apache.activemq.jaas.guest.user="anonymous"
       org.apache.activemq.jaas.guest.role="brokerbench"
       credentialsInvalidate=true;
};
"#;

/// Writes the user (with the home's password, 0600) and its role beside `login.config`.
pub fn write_users(dir: &Path, files: &TlsFiles) -> Result<(), BrokerError> {
    let user = tls::USER;
    let users = format!("{user} = {}\n", files.password()?);
    tls::write_private(&dir.join("artemis-users.properties"), users.as_bytes())?;
    let roles = format!("brokerbench = {user}\n");
    process::write_atomically(&dir.join("artemis-roles.properties"), roles.as_bytes())
}

/// The TLS acceptor's port a configuration names, if it has one.
pub fn tls_port(configuration: &str) -> Option<u16> {
    let at = configuration.find(TLS_MARK)?;
    let rest = &configuration[at..];
    let start = rest.find("tcp://127.0.0.1:")? + "tcp://127.0.0.1:".len();
    let digits: String = rest[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn key_store(files: &TlsFiles) -> PathBuf {
    files.dir().join("artemis-server.pem")
}
