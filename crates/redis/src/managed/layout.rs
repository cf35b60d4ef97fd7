//! The managed server's configuration file, and what is read back from it and from
//! `redis-server --version`.

use std::path::Path;

/// `redis.conf` for a server on 127.0.0.1:`port` keeping its data in `data`: the append-only
/// file on (fsync every second), no RDB snapshots (a snapshot of a large stream in the middle of
/// a run would fork and copy it), its log on stdout (the daemon's log file), and at most
/// 4 GiB of memory (streams keep every entry: a long run at the maximum rate fails its sends
/// with OOM instead of the machine swapping).
pub fn redis_conf(port: u16, data: &Path) -> String {
    format!(
        "\
# Written by brokerbench for its managed Redis; rewritten at each start.
bind 127.0.0.1
port {port}
protected-mode yes
daemonize no
set-proc-title no
dir \"{data}\"
logfile \"\"
appendonly yes
appendfsync everysec
save \"\"
maxmemory 4gb
maxmemory-policy noeviction
",
        data = data.display()
    )
}

/// The port a configuration names.
pub fn port_of(configuration: &str) -> Option<u16> {
    configuration
        .lines()
        .find_map(|l| l.strip_prefix("port "))
        .and_then(|p| p.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_read_back() {
        let text = redis_conf(6390, Path::new("/tmp/x/data"));
        assert_eq!(port_of(&text), Some(6390));
        assert!(text.contains("dir \"/tmp/x/data\"\n"));
    }
}
