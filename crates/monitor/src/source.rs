//! Where the sampler's readings of `/proc` come from. The sampler's algorithm (the process
//! table's cache, the tree walk, the deltas) is written once, over [`ProcSource`];
//! [`ProcFiles`] reads the files with brokerbench's own parsers and is what runs. Another
//! source (the `procfs_cost` example reads through the `procfs` crate) gets the same
//! algorithm, so only reading and parsing differ between the two.

use std::io;
use std::path::Path;

use crate::procfs::{self, CpuTimes, DiskCounters, InterfaceCounters, ProcIo, ProcStat};

/// The readings the sampler takes; each is `None` (or an error) when it cannot be read.
pub trait ProcSource {
    /// `/proc/PID/stat`.
    fn stat(&mut self, pid: u32) -> Option<ProcStat>;
    /// `/proc/PID/io`: an error keeps the kind of the failure (`PermissionDenied` for another
    /// user's process, `NotFound` for one that is gone); `Ok(None)` when it does not parse.
    fn io(&mut self, pid: u32) -> io::Result<Option<ProcIo>>;
    /// The aggregate `cpu` line of `/proc/stat` and the number of `cpuN` lines.
    fn cpu(&mut self) -> Option<(CpuTimes, u32)>;
    /// One-minute load average.
    fn load_1m(&mut self) -> Option<f64>;
    /// Memory in use (total − available) and page cache, bytes.
    fn memory(&mut self) -> (Option<u64>, Option<u64>);
    /// Every device of `/proc/diskstats`.
    fn disks(&mut self) -> Option<Vec<DiskCounters>>;
    /// Every interface of `/proc/net/dev`.
    fn interfaces(&mut self) -> Option<Vec<InterfaceCounters>>;
}

/// Reads `/proc` with brokerbench's own parsers, through one reused buffer.
#[derive(Debug)]
pub struct ProcFiles {
    buffer: String,
}

impl Default for ProcFiles {
    fn default() -> Self {
        ProcFiles {
            buffer: String::with_capacity(4096),
        }
    }
}

impl ProcFiles {
    fn read(&mut self, path: impl AsRef<Path>) -> io::Result<&str> {
        procfs::read_into(path, &mut self.buffer)?;
        Ok(&self.buffer)
    }
}

impl ProcSource for ProcFiles {
    fn stat(&mut self, pid: u32) -> Option<ProcStat> {
        procfs::parse_stat(self.read(format!("/proc/{pid}/stat")).ok()?)
    }

    fn io(&mut self, pid: u32) -> io::Result<Option<ProcIo>> {
        Ok(procfs::parse_io(self.read(format!("/proc/{pid}/io"))?))
    }

    fn cpu(&mut self) -> Option<(CpuTimes, u32)> {
        procfs::parse_proc_stat(self.read("/proc/stat").ok()?)
    }

    fn load_1m(&mut self) -> Option<f64> {
        procfs::parse_loadavg(self.read("/proc/loadavg").ok()?)
    }

    fn memory(&mut self) -> (Option<u64>, Option<u64>) {
        self.read("/proc/meminfo")
            .map_or((None, None), procfs::parse_meminfo)
    }

    fn disks(&mut self) -> Option<Vec<DiskCounters>> {
        Some(procfs::parse_diskstats(self.read("/proc/diskstats").ok()?))
    }

    fn interfaces(&mut self) -> Option<Vec<InterfaceCounters>> {
        Some(procfs::parse_net_dev(self.read("/proc/net/dev").ok()?))
    }
}
