//! Managed brokers of several nodes (`broker up FAMILY --nodes N`), one cluster at a time, each
//! in a brokerbench home of its own on free ports, so the shared managed brokers of the other
//! test binaries are not touched.

mod common;

use std::process::Output;

use common::*;

/// A brokerbench home of its own and a free port layout for the managed nats-server
/// (`port` and `port + 4000`); takes the cluster down when dropped, even after a failure.
struct NatsHome {
    home: tempfile::TempDir,
    port: String,
}

impl NatsHome {
    fn new() -> NatsHome {
        let port = brokerbench_brokers::test_support::free_port_layout(&[0, 4000]);
        NatsHome {
            home: tempfile::tempdir().unwrap(),
            port: port.to_string(),
        }
    }

    fn env(&self) -> [(&str, &str); 2] {
        [
            ("BROKERBENCH_HOME", self.home.path().to_str().unwrap()),
            ("BROKERBENCH_NATS_PORT", &self.port),
        ]
    }

    fn broker(&self, args: &[&str]) -> Output {
        brokerbench()
            .envs(self.env())
            .arg("broker")
            .args(args)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap()
    }

    fn status(&self) -> serde_json::Value {
        let output = self.broker(&["status", "nats", "--json"]);
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {output:?}"))
    }
}

impl Drop for NatsHome {
    fn drop(&mut self) {
        let _ = self.broker(&["down", "nats"]);
    }
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A process's resident memory now, from /proc/PID/status.
fn rss_bytes(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kib * 1024
}

/// Running: its /proc entry is there and it is no zombie (a stopped node waits to be reaped
/// by whoever adopted it).
fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        !matches!(state, Some('Z' | 'X') | None)
    })
}

#[test]
fn a_nats_cluster_of_three_runs_a_stream_of_three_replicas_losslessly() {
    let _turn = serial();
    let cluster = NatsHome::new();
    let up = cluster.broker(&["up", "nats", "--nodes", "3"]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        String::from_utf8_lossy(&up.stdout).contains("node 3 at 127.0.0.1:"),
        "{}",
        text(&up)
    );

    let status = cluster.status();
    assert_eq!(status["running"], true, "{status:#}");
    let nodes = status["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{status:#}");
    let pids: Vec<u64> = nodes.iter().map(|n| n["pid"].as_u64().unwrap()).collect();
    assert!(pids.iter().all(|&pid| alive(pid)), "{status:#}");
    assert_eq!(
        nodes[0]["address"],
        format!("127.0.0.1:{}", cluster.port),
        "node 1 keeps the family's port: {status:#}"
    );

    // Another size is refused and changes nothing.
    let other = cluster.broker(&["up", "nats", "--nodes", "1"]);
    assert!(!other.status.success(), "{}", text(&other));
    assert!(
        text(&other).contains("runs already with 3 node(s), not 1"),
        "{}",
        text(&other)
    );
    assert_eq!(cluster.status()["nodes"], status["nodes"]);

    // A run with no servers uses the cluster; its stream is kept to be read back.
    let prefix = format!("cluster{}", std::process::id());
    let stream_prefix = format!("stream_prefix={prefix}");
    let mut sets = short("2000", 2);
    sets.extend([
        "replicas=3".into(),
        "delete_streams=false".into(),
        stream_prefix,
    ]);
    let args = [vec!["--driver", NATS_DRIVER], with_sets(&sets, &[])].concat();
    let run = run_with_env(tempfile::tempdir().unwrap(), &args, &cluster.env());
    let s = assert_lossless(&run);
    let broker = &run.manifest()["broker"];
    assert_eq!(
        broker["nodes"].as_array().map(Vec::len),
        Some(3),
        "{broker:#}"
    );
    // Every node is sampled, summed: one node's memory is about a third of the three's.
    let nodes_rss: u64 = pids.iter().map(|&pid| rss_bytes(pid)).sum();
    let sampled = s["resources"]["broker"]["rss_bytes_max"].as_u64().unwrap();
    assert!(
        sampled as f64 > 0.6 * nodes_rss as f64,
        "the broker's sampled RSS {sampled} against the three nodes' {nodes_rss} now"
    );

    let address = nodes[0]["address"].as_str().unwrap();
    let names = jetstream_at(address, "$JS.API.STREAM.NAMES", serde_json::json!({}));
    let name = names["streams"]
        .as_array()
        .and_then(|n| {
            n.iter()
                .filter_map(|n| n.as_str())
                .find(|n| n.starts_with(&prefix))
        })
        .unwrap_or_else(|| panic!("the run's stream: {names}"))
        .to_string();
    let info = jetstream_at(
        address,
        &format!("$JS.API.STREAM.INFO.{name}"),
        serde_json::json!({}),
    );
    assert_eq!(info["config"]["num_replicas"], 3, "{info:#}");
    let replicas = info["cluster"]["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2, "a leader and two replicas: {info:#}");
    assert_eq!(
        info["state"]["messages"], s["total"]["acknowledged"],
        "the stream holds what was acknowledged: {info:#}"
    );

    let down = cluster.broker(&["down", "nats"]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(
        pids.iter().all(|&pid| !alive(pid)),
        "down leaves no node: {pids:?}"
    );
    assert_eq!(cluster.status()["running"], false);
}

#[test]
fn nodes_and_json_go_with_their_actions_and_sizes_are_bounded() {
    let _turn = serial();
    let cluster = NatsHome::new();
    for (args, says) in [
        (
            &["down", "nats", "--nodes", "3"][..],
            "--nodes goes with `up`",
        ),
        (&["up", "nats", "--json"][..], "--json goes with `status`"),
        (&["up", "nats", "--nodes", "6"][..], "runs 1 to 5 node(s)"),
        (&["up", "nats", "--nodes", "0"][..], "runs 1 to 5 node(s)"),
        (
            &["up", "kafka", "--nodes", "3"][..],
            "clusters of it are not built yet",
        ),
    ] {
        let output = cluster.broker(args);
        assert!(!output.status.success(), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(says), "{args:?}: {}", text(&output));
    }
    let status = cluster.status();
    assert_eq!(status["running"], false, "nothing was started: {status:#}");
}
