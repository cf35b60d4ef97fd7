//! The process table the tree targets need, kept cheap: `/proc` is listed every sample, but
//! `/proc/PID/stat` is read again only for processes that may belong to a monitored tree.
//!
//! Why skipping the others is safe: a process outside every tree cannot join one later
//! (re-parenting only moves orphans up to an ancestor, init or a subreaper, and an ancestor
//! inside a tree would have made it a member already). Only a new process can join, and a
//! new process has a new `/proc/PID` entry: the kernel flushes a dead process's `/proc`
//! entries, so a reused pid comes back with a new inode number. So a stat is read when the
//! pid is new, its entry's inode number changed, or it was a tree member at the last
//! refresh; and, as a safety net, every process is read again every `FULL_SCAN_EVERY`
//! refreshes. Reading every stat costs about 10 µs per process, which on a host with a
//! thousand processes would be the whole budget of a sample.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::DirEntryExt;

use crate::process::{descendants, Processes};
use crate::source::ProcSource;

/// Every how many refreshes all stats are read again regardless of the cache.
const FULL_SCAN_EVERY: u64 = 60;

/// Processes of the host by pid, with the stats of tree members fresh.
#[derive(Debug, Default)]
pub(crate) struct ProcessTable {
    stats: Processes,
    /// Inode number of each `/proc/PID` entry when its stat was read.
    inodes: HashMap<u32, u64>,
    /// Members of the trees at the last refresh.
    members: HashSet<u32>,
    refreshes: u64,
}

impl ProcessTable {
    /// Lists `/proc` and reads the stats that may have changed for the trees of `roots`.
    pub fn refresh(&mut self, roots: &[u32], source: &mut impl ProcSource) {
        let full_scan = self.refreshes.is_multiple_of(FULL_SCAN_EVERY);
        self.refreshes += 1;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            self.stats.clear();
            return;
        };
        let mut listed: HashMap<u32, u64> = HashMap::with_capacity(self.stats.len() + 16);
        for entry in entries.flatten() {
            if let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                listed.insert(pid, entry.ino());
            }
        }
        self.stats.retain(|pid, _| listed.contains_key(pid));
        self.inodes.retain(|pid, _| listed.contains_key(pid));
        for (&pid, &inode) in &listed {
            let cached = self.inodes.get(&pid) == Some(&inode) && self.stats.contains_key(&pid);
            if cached && !full_scan && !self.members.contains(&pid) && !roots.contains(&pid) {
                continue;
            }
            match source.stat(pid) {
                Some(stat) => {
                    self.stats.insert(pid, stat);
                    self.inodes.insert(pid, inode);
                }
                None => {
                    self.stats.remove(&pid);
                    self.inodes.remove(&pid);
                }
            }
        }
        self.members = roots
            .iter()
            .filter(|root| self.stats.contains_key(root))
            .flat_map(|&root| descendants(root, &self.stats))
            .collect();
    }

    /// The processes: fresh stats for tree members, possibly older ones for the rest.
    pub fn processes(&self) -> &Processes {
        &self.stats
    }
}
