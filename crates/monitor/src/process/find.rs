//! Finding a broker process by name (`--broker-process NAME`): its command name or command
//! line, leaving out this process, its ancestors and matches inside another match.

use std::collections::HashSet;
use std::path::Path;

use super::tree::Processes;
use crate::procfs;

/// Reads `/proc/PID/stat` of every process.
fn read_all_processes(buffer: &mut String) -> Processes {
    procfs::list_pids()
        .into_iter()
        .filter_map(|pid| {
            procfs::read_into(format!("/proc/{pid}/stat"), buffer).ok()?;
            Some((pid, procfs::parse_stat(buffer)?))
        })
        .collect()
}

/// Finds running processes by name, for `--broker-process NAME`. A process matches when
///
/// 1. its command name (`/proc/PID/comm`, at most 15 bytes) equals `name`, or equals the
///    first 15 bytes of a longer `name`; or
/// 2. the file name of its first argument (`argv[0]` with any directory stripped) equals
///    `name`; or
/// 3. any later argument (`argv[1..]`) contains `name` as a substring (so `kafka.Kafka`
///    finds `java ... kafka.Kafka config/server.properties`).
///
/// Left out: this process and its ancestors (whose command lines carry the name as an
/// option), exited (zombie) processes, and every match that descends from another match,
/// because a broker target counts descendants anyway (a start script and the JVM it forks
/// give one pid, the script's). The result is sorted by pid; more than one pid means the
/// name is ambiguous and the caller should ask for a pid.
pub fn find_pids_by_name(name: &str) -> Vec<u32> {
    if name.is_empty() {
        return Vec::new();
    }
    let mut buffer = String::new();
    let table = read_all_processes(&mut buffer);
    let mut excluded = HashSet::new();
    let mut pid = std::process::id();
    while pid > 1 && excluded.insert(pid) {
        match table.get(&pid) {
            Some(stat) => pid = stat.ppid,
            None => break,
        }
    }
    let comm_name = truncate_to_comm(name);
    let mut matches: HashSet<u32> = HashSet::new();
    for (&pid, stat) in &table {
        if excluded.contains(&pid) || stat.exited() {
            continue;
        }
        let comm_matches = procfs::read_into(format!("/proc/{pid}/comm"), &mut buffer).is_ok()
            && buffer.trim_end_matches('\n') == comm_name;
        if comm_matches || cmdline_matches(Path::new(&format!("/proc/{pid}/cmdline")), name) {
            matches.insert(pid);
        }
    }
    let mut top: Vec<u32> = matches
        .iter()
        .copied()
        .filter(|&pid| !has_matching_ancestor(pid, &matches, &table))
        .collect();
    top.sort_unstable();
    top
}

/// The kernel keeps at most 15 bytes of a command name; cut `name` the same way (on a
/// character boundary).
fn truncate_to_comm(name: &str) -> &str {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

fn cmdline_matches(path: &Path, name: &str) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let args = procfs::parse_cmdline(&bytes);
    let Some((first, rest)) = args.split_first() else {
        return false;
    };
    let base = first.rsplit('/').next().unwrap_or(first);
    base == name || rest.iter().any(|arg| arg.contains(name))
}

fn has_matching_ancestor(pid: u32, matches: &HashSet<u32>, table: &Processes) -> bool {
    let mut seen = HashSet::new();
    let mut current = pid;
    while let Some(stat) = table.get(&current) {
        let parent = stat.ppid;
        if parent == 0 || !seen.insert(parent) {
            return false;
        }
        if matches.contains(&parent) {
            return true;
        }
        current = parent;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_names_are_cut_like_the_kernel() {
        assert_eq!(truncate_to_comm("kafka-server-start"), "kafka-server-st");
        assert_eq!(truncate_to_comm("redis"), "redis");
    }
}
