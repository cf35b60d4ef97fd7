//! Managed brokers of several nodes on this machine, the parts every family shares: where
//! node k lives, how many nodes the last start started, the size check, and free ports for
//! the nodes beyond the first (node 1 keeps the family's usual port).

use std::path::{Path, PathBuf};

use crate::daemon::Daemon;
use crate::{BrokerError, BrokerStatus, NodeStatus};

/// The most nodes `broker up NAME --nodes N` starts on one machine.
pub const MAX_NODES: u32 = 5;

/// The file, in the broker's folder, that records how many nodes its last start started.
const SIZE_FILE: &str = "nodes";

/// Node `id`'s daemon: node 1 is the broker's own folder, so that a broker of one node is
/// what it always was; node k is the folder `node-k` inside it.
pub fn node_daemon(first: &Daemon, id: u32) -> Daemon {
    if id <= 1 {
        return first.clone();
    }
    Daemon {
        dir: node_dir(&first.dir, id),
        ..first.clone()
    }
}

/// The folder of node `id` (> 1) of the broker kept in `dir`.
pub fn node_dir(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("node-{id}"))
}

/// How many nodes the last start in `dir` started (1 when none is recorded).
pub fn recorded_size(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join(SIZE_FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .filter(|n| (1..=MAX_NODES).contains(n))
        .unwrap_or(1)
}

/// Records that the start in `dir` starts `nodes` nodes.
pub fn record_size(dir: &Path, nodes: u32) -> Result<(), BrokerError> {
    let file = dir.join(SIZE_FILE);
    std::fs::write(&file, format!("{nodes}\n")).map_err(BrokerError::io("writing", &file))
}

/// `--nodes` within 1 to `max`.
pub fn check_size(broker: &'static str, asked: u32, max: u32) -> Result<(), BrokerError> {
    if (1..=max).contains(&asked) {
        return Ok(());
    }
    Err(BrokerError::TooManyNodes { broker, asked, max })
}

/// A running broker of `running` nodes answers `up --nodes asked` only when they agree.
pub fn check_running_size(
    broker: &'static str,
    running: u32,
    asked: Option<u32>,
) -> Result<(), BrokerError> {
    match asked {
        Some(asked) if asked != running => Err(BrokerError::ClusterSize {
            broker,
            running,
            asked,
        }),
        _ => Ok(()),
    }
}

/// The broker's status from its nodes' (node 1 first): the status `status_of(index, pid)`
/// gives for the first running one, with every node listed. None when no node runs.
pub fn status_of_nodes(
    nodes: Vec<NodeStatus>,
    status_of: impl FnOnce(usize, u32) -> BrokerStatus,
) -> Option<BrokerStatus> {
    let (index, pid) = nodes
        .iter()
        .enumerate()
        .find_map(|(index, node)| Some((index, node.pid?)))?;
    let mut status = status_of(index, pid);
    status.nodes = nodes;
    Some(status)
}

/// Stops every node at once with `stop`: one by one, a node could wait out its grace for the
/// quorum that the others took with them. The first error, once every stop has ended.
pub fn stop_all<T: Sync>(
    nodes: &[T],
    stop: impl Fn(&T) -> Result<(), BrokerError> + Sync,
) -> Result<(), BrokerError> {
    std::thread::scope(|scope| {
        let stops: Vec<_> = nodes
            .iter()
            .map(|node| scope.spawn(|| stop(node)))
            .collect();
        stops
            .into_iter()
            .map(|stop| stop.join().expect("a stop does not panic"))
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    })
}

pub use crate::free_ports::{free_layout, free_ports};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn node_one_is_the_brokers_own_folder_and_the_others_nest() {
        let first = Daemon {
            name: "nats",
            dir: PathBuf::from("/h/nats"),
            start_timeout: Duration::from_secs(1),
            stop_grace: Duration::from_secs(1),
        };
        assert_eq!(node_daemon(&first, 1).dir, PathBuf::from("/h/nats"));
        assert_eq!(node_daemon(&first, 3).dir, PathBuf::from("/h/nats/node-3"));
        assert_eq!(
            node_daemon(&first, 3).config_file(),
            PathBuf::from("/h/nats/node-3/nats.conf")
        );
    }

    #[test]
    fn the_recorded_size_survives_and_defaults_to_one() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded_size(dir.path()), 1);
        record_size(dir.path(), 3).unwrap();
        assert_eq!(recorded_size(dir.path()), 3);
        std::fs::write(dir.path().join(SIZE_FILE), "99\n").unwrap();
        assert_eq!(recorded_size(dir.path()), 1, "out of range reads as one");
    }

    #[test]
    fn sizes_are_checked_and_a_mismatch_names_the_restart() {
        assert!(check_size("nats", 3, 5).is_ok());
        for bad in [0, 6] {
            let error = check_size("nats", bad, 5).unwrap_err().to_string();
            assert!(error.contains("runs 1 to 5 node(s)"), "{error}");
        }
        assert!(check_running_size("nats", 3, None).is_ok());
        assert!(check_running_size("nats", 3, Some(3)).is_ok());
        let error = check_running_size("nats", 3, Some(1))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("3 node(s), not 1")
                && error.contains("brokerbench broker up nats --nodes 1"),
            "{error}"
        );
    }

    #[test]
    fn a_brokers_status_is_its_first_running_nodes_with_every_node_listed() {
        let node = |id: u32, pid: Option<u32>| NodeStatus {
            id,
            pid,
            address: format!("127.0.0.1:{}", 9000 + id),
            up: pid.is_some(),
        };
        let status_of = |index: usize, pid: u32| BrokerStatus {
            name: "kafka",
            address: format!("node index {index}"),
            pid,
            version: "1".into(),
            data_dir: PathBuf::new(),
            log_file: PathBuf::new(),
            note: None,
            nodes: Vec::new(),
            settings: Vec::new(),
        };
        let nodes = vec![node(1, None), node(2, Some(22)), node(3, Some(33))];
        let status = status_of_nodes(nodes.clone(), status_of).unwrap();
        assert_eq!((status.address.as_str(), status.pid), ("node index 1", 22));
        assert_eq!(status.nodes, nodes, "every node, the one down too");
        assert!(status_of_nodes(vec![node(1, None)], status_of).is_none());
    }

    #[test]
    fn every_node_is_stopped_and_the_first_error_said() {
        let stopped = std::sync::Mutex::new(Vec::new());
        let outcome = stop_all(&[1, 2, 3], |&n| {
            stopped.lock().unwrap().push(n);
            match n {
                2 => Err(BrokerError::Unsupported { what: "two".into() }),
                _ => Ok(()),
            }
        });
        assert!(outcome.unwrap_err().to_string().contains("two"));
        let mut stopped = stopped.into_inner().unwrap();
        stopped.sort_unstable();
        assert_eq!(stopped, [1, 2, 3], "an error stops no other stop");
    }
}
