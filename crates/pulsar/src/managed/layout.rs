//! The managed broker's configuration, `pulsar.conf`: the distribution's `standalone.conf`
//! with brokerbench's settings after it (a later key wins in a Java properties file), written
//! at each start; its path on the JVM's command line tells our process apart.

use std::path::Path;

use brokerbench_brokers::BrokerError;

/// The key the broker's binary-protocol port is set by.
const SERVICE_PORT: &str = "brokerServicePort";
/// The key the admin REST API's and metrics' port is set by.
const WEB_PORT: &str = "webServicePort";

/// The line that records how many bookies the standalone runs (`--nodes`).
const BOOKIES: &str = "# bookies (brokerbench broker up pulsar --nodes N): ";

/// brokerbench's settings: every listener, the bookies' included, on loopback; the binary
/// protocol on `port`, the admin API and `/metrics` on `web`; `bookies` recorded.
pub fn overrides(port: u16, web: u16, bookies: u32) -> String {
    format!(
        "
# Written by brokerbench at each start of the managed Pulsar; edits are overwritten.
{BOOKIES}{bookies}
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
{SERVICE_PORT}={port}
{WEB_PORT}={web}
# The bookie inside the standalone broker listens on loopback too.
listeningInterface=lo
allowLoopback=true
# A backlog quota is enforced within a second, so that a short run sees its policy act.
backlogQuotaCheckIntervalInSeconds=1
"
    )
}

/// The configuration: the distribution's `conf/standalone.conf` (in `home`) and
/// [`overrides`].
pub fn standalone_conf(
    home: &Path,
    port: u16,
    web: u16,
    bookies: u32,
) -> Result<String, BrokerError> {
    let path = home.join("conf/standalone.conf");
    let mut text = std::fs::read_to_string(&path).map_err(BrokerError::io("reading", &path))?;
    text.push_str(&overrides(port, web, bookies));
    Ok(text)
}

/// The bookies a configuration was written for (1 when it does not say).
pub fn bookies(configuration: &str) -> u32 {
    configuration
        .lines()
        .filter_map(|line| line.strip_prefix(BOOKIES)?.trim().parse().ok())
        .next_back()
        .unwrap_or(1)
}

/// The binary-protocol port a configuration sets (its last setting).
pub fn service_port(configuration: &str) -> Option<u16> {
    last_value(configuration, SERVICE_PORT)
}

/// The web port a configuration sets.
pub fn web_port(configuration: &str) -> Option<u16> {
    last_value(configuration, WEB_PORT)
}

fn last_value(configuration: &str, key: &str) -> Option<u16> {
    configuration
        .lines()
        .filter_map(|line| line.trim().strip_prefix(key)?.strip_prefix('='))
        .filter_map(|value| value.trim().parse().ok())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_port_setting_wins() {
        let text = format!(
            "brokerServicePort=6650\nwebServicePort=8080\n{}",
            overrides(6651, 8081, 3)
        );
        assert_eq!((bookies(&text), bookies("")), (3, 1));
        assert_eq!(
            (service_port(&text), web_port(&text)),
            (Some(6651), Some(8081))
        );
        assert_eq!(service_port("brokerServicePortTls=1\n"), None);
    }
}
