//! A cgroup (v2) of its own for each managed node: a node's sockets then carry its group from
//! their creation on, so that a packet filter can tell one node's traffic from another's and
//! from the clients' on the same loopback (a fault's network partition). A node must start in
//! its group: a socket keeps the group it was created in, so moving a running node would miss
//! the connections it already has. Without a writable cgroup2 hierarchy (not root, no cgroup2
//! mount) nodes start as before and a partition is refused.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The folder under the cgroup2 mount that holds the nodes' groups.
const PARENT: &str = "brokerbench";

/// A node's group: its folder, and its depth below the cgroup2 mount (`level` in nftables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    pub dir: PathBuf,
    pub level: u32,
}

/// Where cgroup2 is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid host).
pub fn mount() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (_, dir, kind) = (fields.next()?, fields.next()?, fields.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(dir))
    })
}

/// A new, empty group for a node about to start, and its `cgroup.procs` open for writing (the
/// child writes itself into it between fork and exec). None when groups cannot be made here.
/// Groups of nodes that have exited are removed first (a group with a process in it is not).
pub fn new_node_group() -> Option<File> {
    let parent = mount()?.join(PARENT);
    fs::create_dir_all(&parent).ok()?;
    remove_empty_groups(&parent);
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "node-{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        now_ns()
    );
    let dir = parent.join(name);
    fs::create_dir(&dir).ok()?;
    OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .ok()
}

/// rmdir of each child group made over a minute ago: the kernel refuses the ones that still
/// hold a process, and a younger one may be another start's, its node not in it yet.
fn remove_empty_groups(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let minute_ago = now_ns().saturating_sub(60_000_000_000);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let made = name
            .to_str()
            .and_then(|n| n.rsplit('-').next()?.parse::<u128>().ok());
        if made.is_some_and(|ns| ns < minute_ago) {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The group of brokerbench's that `pid` runs in, None when it runs outside them (a node
/// started before nodes had groups, or on a host where they cannot be made).
pub fn group_of(pid: u32) -> Option<NodeGroup> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let relative = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let relative = relative.trim_start_matches('/');
    if !relative.starts_with(&format!("{PARENT}/")) {
        return None;
    }
    Some(NodeGroup {
        dir: mount()?.join(relative),
        level: relative.split('/').count() as u32,
    })
}

/// The processes in a group now (a node's start script, its VM, their helpers).
pub fn processes(group: &NodeGroup) -> Vec<u32> {
    fs::read_to_string(group.dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleep() -> std::process::Child {
        crate::process::spawn_detached(std::process::Command::new("sleep").arg("30")).unwrap()
    }

    #[test]
    fn a_process_outside_brokerbenchs_groups_has_none() {
        assert_eq!(group_of(std::process::id()), None);
        assert_eq!(group_of(u32::MAX), None);
    }

    #[test]
    fn a_detached_start_runs_in_a_group_of_its_own_and_old_empty_groups_go() {
        let mut first = sleep();
        let Some(group) = group_of(first.id()) else {
            // Only where groups can be made (root, cgroup2 mounted and writable).
            assert!(new_node_group().is_none(), "a group could be made");
            first.kill().unwrap();
            first.wait().unwrap();
            return;
        };
        assert_eq!(processes(&group), vec![first.id()]);
        let mut second = sleep();
        assert_ne!(
            group_of(second.id()),
            Some(group.clone()),
            "one group per node"
        );
        first.kill().unwrap();
        first.wait().unwrap();
        // An empty group made over a minute ago, as far as its name says, goes at the next
        // start; the young one of the exited node stays until then.
        let old = group.dir.with_file_name("node-1-0-1");
        fs::create_dir(&old).unwrap();
        let mut third =
            crate::process::spawn_detached(&mut std::process::Command::new("true")).unwrap();
        third.wait().unwrap();
        assert!(
            !old.exists(),
            "an empty group over a minute old was removed at the next start"
        );
        assert!(group.dir.exists(), "a group under a minute old is kept");
        second.kill().unwrap();
        second.wait().unwrap();
    }
}
