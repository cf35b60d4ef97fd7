//! `action: partition`: a node cut off from the other nodes while clients still reach it. Every
//! node runs in a cgroup of its own ([`brokerbench_brokers::cgroup`]), so an nftables table on
//! the output hook can drop what one node's sockets send to the others' listening ports and
//! what theirs send to its ports, on loopback, while the clients (in no node's group) still
//! reach every node. The table is deleted when the fault ends, and a table left by a run that
//! was killed is deleted by the next run on a managed broker ([`sweep`]). Each rule counts what
//! it drops: a cut that dropped nothing is said, not passed off as a partition.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use brokerbench_brokers::cgroup::{self, NodeGroup};

use crate::nodes::Nodes;

/// The prefix of the tables this module makes: `brokerbench_fault_<pid>_<fault number>`.
const PREFIX: &str = "brokerbench_fault_";

/// Where nftables looks a cgroup path up.
const NFT_CGROUPS: &str = "/sys/fs/cgroup";

/// A node with its group and the TCP ports it listens on.
struct Member {
    id: u32,
    group: NodeGroup,
    ports: BTreeSet<u16>,
}

/// Whether partitions can be made on this host with the nodes of the managed `family`:
/// nftables usable as root, every running node in a group of its own, and a cut's rules
/// accepted by the kernel (checked, not loaded). The reason when not, with the fix.
pub fn check(nodes: &dyn Nodes, family: &str) -> Result<(), String> {
    nft(&["list", "tables"], None).map_err(|e| {
        format!("a partition needs nftables as root (`nft`; scripts/setup installs it): {e}")
    })?;
    let fix = format!("stop the broker (brokerbench broker down {family}) and start it again");
    let members = members(nodes, &fix)?;
    let Some(first) = members.first() else {
        return Ok(());
    };
    let script = cut_script(&format!("{PREFIX}check"), first.id, &members)?;
    nft(&["-c", "-f", "-"], Some(&script)).map_err(|e| {
        format!("this host's nftables cannot match a socket's cgroup (`socket cgroupv2`, Linux 5.13 or later): {e}")
    })?;
    Ok(())
}

/// Deletes the tables of runs that are gone (killed before their partition ended), so that no
/// cut outlives its run; quiet where nftables cannot be used.
pub fn sweep() {
    let Ok(listing) = nft(&["list", "tables"], None) else {
        return;
    };
    for name in listing
        .lines()
        .filter_map(|l| l.strip_prefix("table inet "))
    {
        let owner = name.strip_prefix(PREFIX).and_then(|r| r.split('_').next());
        let alive = |pid: &str| Path::new(&format!("/proc/{pid}")).exists();
        if owner.is_some_and(|pid| !alive(pid)) {
            let _ = nft(&["delete", "table", "inet", name], None);
        }
    }
}

/// Cuts node `id` off from the others; the table to delete to end it.
pub(crate) fn cut(index: usize, id: u32, nodes: &dyn Nodes) -> Result<String, String> {
    let members = members(nodes, "stop the broker and start it again")?;
    let table = format!("{PREFIX}{}_{}", std::process::id(), index + 1);
    let script = cut_script(&table, id, &members)?;
    nft(&["-f", "-"], Some(&script))?;
    Ok(table)
}

/// The table that cuts node `id` off from the other `members`, each rule counting its drops.
fn cut_script(table: &str, id: u32, members: &[Member]) -> Result<String, String> {
    let (cut, rest): (Vec<_>, Vec<_>) = members.iter().partition(|m| m.id == id);
    let cut = cut
        .first()
        .ok_or_else(|| format!("node {id} was not running"))?;
    let others: BTreeSet<u16> = rest.iter().flat_map(|m| m.ports.iter().copied()).collect();
    let mut rules = vec![drop_rule(&cut.group, &others)?];
    for other in &rest {
        rules.push(drop_rule(&other.group, &cut.ports)?);
    }
    Ok(format!(
        "table inet {table} {{\n  chain output {{\n    type filter hook output priority 0; policy accept;\n{}  }}\n}}\n",
        rules.concat()
    ))
}

/// Ends a partition: the nodes reach each other again. How many packets its rules dropped.
pub(crate) fn heal(table: &str) -> Result<u64, String> {
    let listing = nft(&["list", "table", "inet", table], None);
    nft(&["delete", "table", "inet", table], None).map_err(|e| {
        format!("{e}; the nodes stay cut off until `nft delete table inet {table}`")
    })?;
    Ok(listing.map_or(0, |text| dropped_packets(&text)))
}

/// The packets a table's rules counted (`counter packets N bytes M`).
fn dropped_packets(listing: &str) -> u64 {
    listing
        .split("packets ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A rule dropping what `group` sends to `ports` (nothing when there are none).
fn drop_rule(group: &NodeGroup, ports: &BTreeSet<u16>) -> Result<String, String> {
    if ports.is_empty() {
        return Ok(String::new());
    }
    let path = group.dir.strip_prefix(NFT_CGROUPS).map_err(|_| {
        format!(
            "nftables finds cgroups under {NFT_CGROUPS} only, and this host mounts cgroup2 at {}",
            group.dir.display()
        )
    })?;
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    Ok(format!(
        "    socket cgroupv2 level {} \"{}\" tcp dport {{ {} }} counter drop\n",
        group.level,
        path.display(),
        ports.join(", ")
    ))
}

/// The running nodes, each with its group and ports; `fix` for a node outside a group.
fn members(nodes: &dyn Nodes, fix: &str) -> Result<Vec<Member>, String> {
    let mut members = Vec::new();
    for id in 1..=nodes.count() {
        let Some(pid) = nodes.pid(id) else {
            continue;
        };
        let group = cgroup::group_of(pid).ok_or_else(|| {
            format!("node {id} (pid {pid}) runs outside a cgroup of its own: it was started before brokerbench gave nodes one ({fix}), or this host cannot make them (it needs root, with cgroup2 mounted and writable)")
        })?;
        let own = descendants(pid, &cgroup::processes(&group));
        let ports = listening_ports(&own);
        members.push(Member { id, group, ports });
    }
    Ok(members)
}

/// `pid` and those of `pids` that descend from it: a node's own processes, not a daemon it
/// started that serves every node (RabbitMQ's epmd, one port for the whole machine).
fn descendants(pid: u32, pids: &[u32]) -> Vec<u32> {
    let descends = |mut p: u32| {
        for _ in 0..64 {
            if p == pid {
                return true;
            }
            match parent(p) {
                Some(up) if up > 1 => p = up,
                _ => return false,
            }
        }
        false
    };
    let mut own: Vec<u32> = pids.iter().copied().filter(|p| descends(*p)).collect();
    if !own.contains(&pid) {
        own.insert(0, pid);
    }
    own
}

/// A process's parent, from /proc/PID/stat (the field after the state, past the name's `)`).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The TCP ports that `pids` listen on (IPv4 and IPv6).
fn listening_ports(pids: &[u32]) -> BTreeSet<u16> {
    let inodes: BTreeSet<u64> = pids.iter().flat_map(|pid| socket_inodes(*pid)).collect();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|table| {
            std::fs::read_to_string(table)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .filter_map(listener)
                .collect::<Vec<_>>()
        })
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(port, _)| port)
        .collect()
}

/// A LISTEN row of /proc/net/tcp: its local port and socket inode.
fn listener(row: &str) -> Option<(u16, u64)> {
    let fields: Vec<&str> = row.split_whitespace().collect();
    let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
    if *state != "0A" {
        return None;
    }
    let port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
    Some((port, inode.parse().ok()?))
}

/// The inodes of the sockets `pid` holds open.
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Runs nft with `args` (and `input` on stdin); its output, or why it failed.
fn nft(args: &[&str], input: Option<&str>) -> Result<String, String> {
    let mut child = Command::new("nft")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run nft: {e}"))?;
    if let Some(text) = input {
        let mut stdin = child.stdin.take().expect("piped stdin");
        if let Err(e) = stdin.write_all(text.as_bytes()) {
            drop(stdin);
            let _ = child.wait();
            return Err(format!("nft: {e}"));
        }
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().map_err(|e| format!("nft: {e}"))?;
    match output.status.success() {
        true => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        false => Err(format!(
            "nft {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_row_gives_its_port_and_inode_and_others_nothing() {
        let listen = "   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listener(listen), Some((0x2384, 31337)));
        let established = listen.replace(" 0A ", " 01 ");
        assert_eq!(listener(&established), None);
    }

    #[test]
    fn the_packets_a_cut_dropped_are_summed_over_its_rules() {
        let listing = "table inet t {\n\tchain output {\n\t\tsocket cgroupv2 level 2 \"a\" tcp dport { 1 } counter packets 12 bytes 720 drop\n\t\tsocket cgroupv2 level 2 \"b\" tcp dport { 2 } counter packets 3 bytes 180 drop\n\t}\n}\n";
        assert_eq!(dropped_packets(listing), 15);
        assert_eq!(dropped_packets("table inet t {\n}\n"), 0);
    }

    #[test]
    fn a_node_owns_its_descendants_and_not_a_daemon_beside_them() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let stranger = 1;
        assert_eq!(
            descendants(me, &[me, child.id(), stranger]),
            [me, child.id()]
        );
        assert_eq!(descendants(child.id(), &[me]), [child.id()]);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_rule_names_the_group_below_the_cgroup_folder_nft_reads() {
        let group = NodeGroup {
            dir: "/sys/fs/cgroup/unified/brokerbench/node-1".into(),
            level: 2,
        };
        let ports = BTreeSet::from([9092, 9093]);
        assert_eq!(
            drop_rule(&group, &ports).unwrap(),
            "    socket cgroupv2 level 2 \"unified/brokerbench/node-1\" tcp dport { 9092, 9093 } counter drop\n"
        );
        assert_eq!(drop_rule(&group, &BTreeSet::new()).unwrap(), "");
        let elsewhere = NodeGroup {
            dir: "/cgroup2/brokerbench/node-1".into(),
            level: 2,
        };
        assert!(drop_rule(&elsewhere, &ports).is_err());
    }
}
