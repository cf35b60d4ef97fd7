//! When a started nats-server counts as ready: it sends its INFO with JetStream on, and, in a
//! cluster, every node is healthy, the JetStream meta group has a leader and every node (else
//! the first stream of several replicas is refused for want of peers), and every node's INFO
//! lists every node's client URL.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

/// How long a readiness request may take.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// True when the server at `port` sends its INFO with JetStream on.
pub(super) fn answers(port: u16) -> bool {
    info(port).is_some_and(|info| info["jetstream"] == true)
}

/// True when the server at `port` tells a connecting client of `size` servers, as the driver
/// counts them to check a stream's replicas against: a new route's client URL reaches the
/// other servers shortly after the meta group has formed.
pub(super) fn lists_all(port: u16, size: usize) -> bool {
    info(port).is_some_and(|info| crate::servers_listed(&info) >= size)
}

/// The INFO the server at `port` sends a connecting client (before any TLS), as JSON.
fn info(port: u16) -> Option<serde_json::Value> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 16384];
    let n = stream.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    let line = text.strip_prefix("INFO ")?.lines().next()?;
    serde_json::from_str(line.trim()).ok()
}

/// True when every node's monitoring endpoint (`monitors`) says it is healthy (`/healthz`: in
/// a cluster, in contact with the JetStream meta leader) and the first knows that leader and
/// a meta group of all the nodes.
pub(super) fn cluster_formed(monitors: &[u16]) -> bool {
    let healthy = monitors.iter().all(|&port| {
        get_json(port, "/healthz", READY_TIMEOUT).is_some_and(|h| h["status"] == "ok")
    });
    healthy
        && get_json(monitors[0], "/jsz", READY_TIMEOUT)
            .is_some_and(|jsz| meta_group_led(&jsz, monitors.len()))
}

/// The meta group in a `/jsz` answer has a leader and `size` members. (Only the leader lists
/// the others and whether they are current; `/healthz` tells that on each node.)
fn meta_group_led(jsz: &serde_json::Value, size: usize) -> bool {
    let meta = &jsz["meta_cluster"];
    meta["leader"].as_str().is_some_and(|l| !l.is_empty())
        && meta["cluster_size"].as_u64() == Some(size as u64)
}

/// GET `path` from the monitoring endpoint on 127.0.0.1:`port`, waiting at most `timeout`:
/// its JSON body (a 200's).
pub(super) fn get_json(port: u16, path: &str, timeout: Duration) -> Option<serde_json::Value> {
    let body = brokerbench_brokers::http::get(port, path, None, timeout)?;
    serde_json::from_str(&body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_meta_group_is_led_with_a_leader_and_every_node() {
        let jsz = |leader: &str, size: u64| json!({"meta_cluster": {"name": "brokerbench", "leader": leader, "cluster_size": size}});
        assert!(meta_group_led(&jsz("brokerbench-2", 3), 3));
        assert!(!meta_group_led(&jsz("", 3), 3), "no leader yet");
        assert!(!meta_group_led(&jsz("brokerbench-2", 2), 3), "a node short");
        assert!(!meta_group_led(
            &json!({"meta_cluster": {"cluster_size": 3}}),
            3
        ));
        assert!(!meta_group_led(&json!({}), 3));
    }
}
