//! Readers and parsers for the few `/proc` and `/sys` files the monitor needs. Parsers take
//! the file text, so they are unit-tested on fixed inputs; readers reuse one buffer.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Reads a whole (small, virtual) file into `buffer`, replacing its contents. Plain `read`
/// calls into a reused buffer: `read_to_string` would add a `statx` and an `lseek` per file
/// to size a buffer for a file whose size /proc reports as 0 anyway.
pub(crate) fn read_into(path: impl AsRef<Path>, buffer: &mut String) -> io::Result<()> {
    let mut bytes = std::mem::take(buffer).into_bytes();
    bytes.clear();
    let result = read_bytes(path.as_ref(), &mut bytes);
    *buffer = String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
    result
}

fn read_bytes(path: &Path, bytes: &mut Vec<u8>) -> io::Result<()> {
    let mut file = File::open(path)?;
    let mut chunk = [0u8; 4096];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// Clock ticks per second used by the tick counters of `/proc/PID/stat` and `/proc/stat`.
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Memory page size, bytes; `/proc/PID/stat` reports RSS in pages.
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// The fields of `/proc/PID/stat` the monitor uses. Tick counters cover all threads of the
/// process, including threads that have exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process state letter (R, S, D, Z, X, ...).
    pub state: u8,
    /// Parent process id.
    pub ppid: u32,
    /// User-mode CPU of the process, clock ticks.
    pub utime: u64,
    /// Kernel-mode CPU of the process, clock ticks.
    pub stime: u64,
    /// User-mode CPU of waited-for (reaped) children, clock ticks.
    pub cutime: u64,
    /// Kernel-mode CPU of waited-for (reaped) children, clock ticks.
    pub cstime: u64,
    /// Number of threads.
    pub num_threads: u64,
    /// Start time after boot, clock ticks; with the pid it identifies a process across pid
    /// reuse.
    pub starttime: u64,
    /// Resident set size, pages.
    pub rss_pages: u64,
}

impl ProcStat {
    /// Whether the process has exited (zombie or dead) and only waits to be reaped.
    pub fn exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses `/proc/PID/stat`. The command name (field 2) is in parentheses and may itself
/// contain spaces and parentheses, so fields are counted from the last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let after_name = &text[text.rfind(')')? + 1..];
    // Field n of proc(5) is at index n − 3 here: index 0 is field 3 (state).
    let mut fields = after_name.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let mut number = |skip: usize| -> Option<u64> { fields.nth(skip)?.parse().ok() };
    let ppid = number(0)? as u32; // field 4
    let utime = number(9)?; // field 14
    let stime = number(0)?; // 15
    let cutime = number(0)?; // 16
    let cstime = number(0)?; // 17
    let num_threads = number(2)?; // 20
    let starttime = number(1)?; // 22
    let rss_pages = number(1)?; // 24
    Some(ProcStat {
        state,
        ppid,
        utime,
        stime,
        cutime,
        cstime,
        num_threads,
        starttime,
        rss_pages,
    })
}

/// Storage I/O counters of `/proc/PID/io`, bytes, cumulative. They cover all threads of the
/// process and the children it has reaped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    /// Bytes the process caused to be fetched from storage.
    pub read_bytes: u64,
    /// Bytes the process caused to be sent to storage (counted when pages are dirtied).
    pub write_bytes: u64,
    /// Bytes of dirtied page cache that were truncated before writeback, so never written.
    pub cancelled_write_bytes: u64,
}

/// Parses `/proc/PID/io`; `None` when a field is missing.
pub(crate) fn parse_io(text: &str) -> Option<ProcIo> {
    let (mut read, mut write, mut cancelled) = (None, None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().parse::<u64>().ok();
        match key {
            "read_bytes" => read = value,
            "write_bytes" => write = value,
            "cancelled_write_bytes" => cancelled = value,
            _ => {}
        }
    }
    Some(ProcIo {
        read_bytes: read?,
        write_bytes: write?,
        cancelled_write_bytes: cancelled?,
    })
}

/// The aggregate `cpu` line of `/proc/stat`, clock ticks, cumulative since boot. As in the
/// kernel, `user` includes `guest` and `nice` includes `guest_nice`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

/// Parses the aggregate `cpu` line of `/proc/stat` and counts the `cpuN` lines. Fields
/// missing on old kernels read as 0.
pub(crate) fn parse_proc_stat(text: &str) -> Option<(CpuTimes, u32)> {
    let mut times = None;
    let mut cpu_count = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("cpu ") {
            let mut values = rest
                .split_ascii_whitespace()
                .map(|v| v.parse::<u64>().unwrap_or(0));
            let mut next = || values.next().unwrap_or(0);
            times = Some(CpuTimes {
                user: next(),
                nice: next(),
                system: next(),
                idle: next(),
                iowait: next(),
                irq: next(),
                softirq: next(),
                steal: next(),
                guest: next(),
                guest_nice: next(),
            });
        } else if line.starts_with("cpu") {
            cpu_count += 1;
        } else if times.is_some() {
            break;
        }
    }
    times.map(|t| (t, cpu_count))
}

/// Parses the one-minute load average, the first field of `/proc/loadavg`.
pub(crate) fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// Memory in use (MemTotal − MemAvailable) and page cache (Cached), bytes, from
/// `/proc/meminfo`.
pub(crate) fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let (mut total, mut available, mut cached) = (None, None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut total,
            "MemAvailable" => &mut available,
            "Cached" => &mut cached,
            _ => continue,
        };
        // Values are in kibibytes despite the "kB" label.
        *slot = value
            .split_ascii_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kib| kib * 1024);
    }
    let used = match (total, available) {
        (Some(t), Some(a)) => Some(t.saturating_sub(a)),
        _ => None,
    };
    (used, cached)
}

/// Cumulative I/O of one block device from `/proc/diskstats`, bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCounters {
    pub name: String,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

/// Parses `/proc/diskstats`. Sector counts there are always in 512-byte units, whatever the
/// device's sector size.
pub(crate) fn parse_diskstats(text: &str) -> Vec<DiskCounters> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            // major minor name reads merged sectors_read ms writes merged sectors_written ...
            if fields.len() < 10 {
                return None;
            }
            Some(DiskCounters {
                name: fields[2].to_string(),
                read_bytes: fields[5].parse::<u64>().ok()? * 512,
                written_bytes: fields[9].parse::<u64>().ok()? * 512,
            })
        })
        .collect()
}

/// Cumulative traffic of one network interface from `/proc/net/dev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

/// Parses `/proc/net/dev` (two header lines, then `name: 8 receive fields, 8 transmit
/// fields`).
pub(crate) fn parse_net_dev(text: &str) -> Vec<InterfaceCounters> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let values: Vec<u64> = rest
                .split_ascii_whitespace()
                .map(|v| v.parse().ok())
                .collect::<Option<_>>()?;
            if values.len() < 10 {
                return None;
            }
            Some(InterfaceCounters {
                name: name.trim().to_string(),
                rx_bytes: values[0],
                rx_packets: values[1],
                tx_bytes: values[8],
                tx_packets: values[9],
            })
        })
        .collect()
}

/// Splits `/proc/PID/cmdline` into its NUL-separated arguments.
pub(crate) fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// Process ids listed in `/proc`, unsorted.
pub(crate) fn list_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parentheses_in_the_name() {
        let text = "4242 (a) b (c)) S 17 4242 1 0 -1 4194560 100 0 0 0 \
                    250 75 3 4 20 0 37 0 123456 1000000 512 18446744073709551615 0\n";
        let stat = parse_stat(text).unwrap();
        assert_eq!(
            stat,
            ProcStat {
                state: b'S',
                ppid: 17,
                utime: 250,
                stime: 75,
                cutime: 3,
                cstime: 4,
                num_threads: 37,
                starttime: 123456,
                rss_pages: 512,
            }
        );
        assert!(!stat.exited());
        assert!(parse_stat("12 (x) Z 1 2 3").is_none());
    }

    #[test]
    fn io_counters() {
        let text = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\n\
                    write_bytes: 8192\ncancelled_write_bytes: 4096\n";
        assert_eq!(
            parse_io(text),
            Some(ProcIo {
                read_bytes: 4096,
                write_bytes: 8192,
                cancelled_write_bytes: 4096
            })
        );
        assert_eq!(parse_io("rchar: 1\n"), None);
    }

    #[test]
    fn proc_stat_cpu_line() {
        let text = "cpu  207731 5 41482 483896 3991 7 2004 1333 11 2\n\
                    cpu0 101274 0 19215 247304 849 0 876 660 0 0\n\
                    cpu1 106456 0 22266 236591 3141 0 1127 673 0 0\nintr 1 2 3\n";
        let (times, cpus) = parse_proc_stat(text).unwrap();
        assert_eq!(cpus, 2);
        assert_eq!(times.user, 207731);
        assert_eq!(times.nice, 5);
        assert_eq!(times.irq, 7);
        assert_eq!(times.steal, 1333);
        assert_eq!(times.guest, 11);
        assert_eq!(times.guest_nice, 2);
    }

    #[test]
    fn meminfo_and_loadavg() {
        let text = "MemTotal:       1000 kB\nMemFree:         100 kB\n\
                    MemAvailable:    400 kB\nBuffers:  1 kB\nCached:          250 kB\n\
                    SwapCached: 9 kB\n";
        assert_eq!(parse_meminfo(text), (Some(600 * 1024), Some(250 * 1024)));
        assert_eq!(parse_loadavg("0.11 0.90 1.10 3/198 2226\n"), Some(0.11));
    }

    #[test]
    fn diskstats_and_net_dev() {
        let disks = parse_diskstats(
            " 254       0 vda 479081 23663 41333930 1081188 76145 31308 103251056 481882 0 \
             78048 1576553 13653 12 96504096 10992 18790 2490\n",
        );
        assert_eq!(
            disks,
            vec![DiskCounters {
                name: "vda".into(),
                read_bytes: 41333930 * 512,
                written_bytes: 103251056 * 512,
            }]
        );
        let net = parse_net_dev(
            "Inter-|   Receive                                                |  Transmit\n \
             face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets \
             errs drop fifo colls carrier compressed\n    lo: 5175 17    0    0    0     0  \
             0         0 5176 18    0    0    0     0       0          0\n",
        );
        assert_eq!(
            net,
            vec![InterfaceCounters {
                name: "lo".into(),
                rx_bytes: 5175,
                rx_packets: 17,
                tx_bytes: 5176,
                tx_packets: 18,
            }]
        );
    }

    #[test]
    fn cmdline_arguments() {
        assert_eq!(
            parse_cmdline(b"/usr/bin/java\0-Xmx1G\0kafka.Kafka\0"),
            vec!["/usr/bin/java", "-Xmx1G", "kafka.Kafka"]
        );
    }
}
