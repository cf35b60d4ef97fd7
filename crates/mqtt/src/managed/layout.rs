//! The managed broker's configuration file, and what is read back from it and from
//! `mosquitto -h`.

use std::path::Path;

/// `mqtt.conf` for a mosquitto on 127.0.0.1:`port` keeping its persistence file in `data`:
/// anonymous clients on the plain listener; `$SYS` figures every second (the broker metrics);
/// a session may queue 1,000,000 messages (mosquitto's default 1,000 would discard what a
/// consumer a moment behind has not taken at the maximum rate) and the broker's heap is
/// bounded at 4 GiB; 1,000 QoS 1 and 2 messages in flight per client each way (the default
/// 20 throttles a 3.1.1 consumer); TCP_NODELAY on its sockets (without it, Nagle's algorithm
/// holds an acknowledgement back for up to 40 ms now and then); run as the user that started it (as root mosquitto would
/// become the user `mosquitto`, who cannot write the folder).
pub fn mosquitto_conf(port: u16, data: &Path, root: bool) -> String {
    let user = if root { "user root\n" } else { "" };
    format!(
        "\
# Written by brokerbench for its managed MQTT broker; rewritten at each start.
{user}per_listener_settings true
persistence true
persistence_location {data}/
persistence_file mosquitto.db
log_dest stdout
log_type error
log_type warning
log_type notice
log_type information
sys_interval 1
set_tcp_nodelay true
max_queued_messages 1000000
max_queued_bytes 0
max_inflight_messages 1000
memory_limit 4294967296
listener {port} 127.0.0.1
allow_anonymous true
",
        data = data.display()
    )
}

/// The port of a configuration's first listener.
pub fn port_of(configuration: &str) -> Option<u16> {
    configuration
        .lines()
        .find_map(|l| l.strip_prefix("listener "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|p| p.parse().ok())
}

/// Whether this process runs as root (the owner of `/proc/self`).
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_read_back() {
        let text = mosquitto_conf(1890, Path::new("/tmp/x/data"), true);
        assert_eq!(port_of(&text), Some(1890));
        assert!(text.starts_with("# Written") && text.contains("\nuser root\n"));
        assert!(text.contains("persistence_location /tmp/x/data/\n"));
    }
}
