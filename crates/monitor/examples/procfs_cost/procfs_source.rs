//! The sampler's readings through the procfs crate: a [`ProcSource`] that opens a process's
//! files with the crate's process API or only its parsers, and reads the host through it.

use brokerbench_monitor::{
    CpuTimes, DiskCounters, InterfaceCounters, ProcIo, ProcSource, ProcStat,
};
use procfs::process::{Io, Process, Stat};
use procfs::{Current, CurrentSI, FromRead, KernelStats, LoadAverage, Meminfo, ProcError};

/// How the procfs side opens a process's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Open {
    /// `Process::new(pid)?.stat()` / `.io()`: the crate's process API.
    Process,
    /// `Stat::from_file("/proc/PID/stat")` / `Io::from_file(..)`: only the crate's parsers.
    Path,
}

/// brokerbench's readings, taken with the procfs crate; plugged into brokerbench's own
/// [`Sampler`], so the algorithm around them is the one that runs.
#[derive(Debug)]
pub(super) struct Procfs(pub(super) Open);

/// The kind of a procfs error as the sampler tells them apart.
fn io_error(error: ProcError) -> std::io::Error {
    let kind = match error {
        ProcError::PermissionDenied(_) => std::io::ErrorKind::PermissionDenied,
        ProcError::NotFound(_) => std::io::ErrorKind::NotFound,
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, error.to_string())
}

impl ProcSource for Procfs {
    fn stat(&mut self, pid: u32) -> Option<ProcStat> {
        let stat = match self.0 {
            Open::Process => Process::new(pid as i32).and_then(|p| p.stat()),
            Open::Path => Stat::from_file(format!("/proc/{pid}/stat")),
        }
        .ok()?;
        Some(ProcStat {
            state: stat.state as u8,
            ppid: stat.ppid as u32,
            utime: stat.utime,
            stime: stat.stime,
            cutime: stat.cutime.max(0) as u64,
            cstime: stat.cstime.max(0) as u64,
            num_threads: stat.num_threads.max(0) as u64,
            starttime: stat.starttime,
            rss_pages: stat.rss,
        })
    }

    fn io(&mut self, pid: u32) -> std::io::Result<Option<ProcIo>> {
        let io: Io = match self.0 {
            Open::Process => Process::new(pid as i32).and_then(|p| p.io()),
            Open::Path => Io::from_file(format!("/proc/{pid}/io")),
        }
        .map_err(io_error)?;
        Ok(Some(ProcIo {
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            cancelled_write_bytes: io.cancelled_write_bytes,
        }))
    }

    fn cpu(&mut self) -> Option<(CpuTimes, u32)> {
        let stats = KernelStats::current().ok()?;
        let t = &stats.total;
        let times = CpuTimes {
            user: t.user,
            nice: t.nice,
            system: t.system,
            idle: t.idle,
            iowait: t.iowait.unwrap_or(0),
            irq: t.irq.unwrap_or(0),
            softirq: t.softirq.unwrap_or(0),
            steal: t.steal.unwrap_or(0),
            guest: t.guest.unwrap_or(0),
            guest_nice: t.guest_nice.unwrap_or(0),
        };
        Some((times, stats.cpu_time.len() as u32))
    }

    fn load_1m(&mut self) -> Option<f64> {
        LoadAverage::current().ok().map(|load| f64::from(load.one))
    }

    fn memory(&mut self) -> (Option<u64>, Option<u64>) {
        match Meminfo::current() {
            Ok(meminfo) => (
                meminfo
                    .mem_available
                    .map(|available| meminfo.mem_total.saturating_sub(available)),
                Some(meminfo.cached),
            ),
            Err(_) => (None, None),
        }
    }

    fn disks(&mut self) -> Option<Vec<DiskCounters>> {
        let disks = procfs::diskstats().ok()?;
        Some(
            disks
                .into_iter()
                .map(|disk| DiskCounters {
                    name: disk.name,
                    read_bytes: disk.sectors_read * 512,
                    written_bytes: disk.sectors_written * 512,
                })
                .collect(),
        )
    }

    fn interfaces(&mut self) -> Option<Vec<InterfaceCounters>> {
        let interfaces = procfs::net::dev_status().ok()?;
        Some(
            interfaces
                .into_values()
                .map(|status| InterfaceCounters {
                    name: status.name,
                    rx_bytes: status.recv_bytes,
                    rx_packets: status.recv_packets,
                    tx_bytes: status.sent_bytes,
                    tx_packets: status.sent_packets,
                })
                .collect(),
        )
    }
}
