//! The nodes faults act on, and the signals they send.

use std::time::{Duration, Instant};

/// The node that leads what a run uses, and what that is ("topic T", "stream S").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub node: u32,
    pub of: String,
}

/// The broker's nodes as the caller knows them (the managed broker's processes).
pub trait Nodes: Send + Sync {
    /// How many nodes the broker has.
    fn count(&self) -> u32;
    /// Node `id`'s process now, if it runs.
    fn pid(&self, id: u32) -> Option<u32>;
    /// Starts node `id` again after a kill or stop and waits until it answers; its new pid.
    fn restart(&self, id: u32) -> Result<u32, String>;
    /// The node that leads the run's first topic, queue or stream now.
    fn leader(&self) -> Result<Leader, String> {
        Err("this broker's leaders are not known to brokerbench".into())
    }
}

/// How long a clean stop may take before the node is killed.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// Sends `signal` to `pid`.
pub(crate) fn signal(pid: u32, signal: libc::c_int) -> Result<(), String> {
    // SAFETY: kill(2) only reads its arguments.
    match unsafe { libc::kill(pid as libc::pid_t, signal) } {
        0 => Ok(()),
        _ => Err(format!(
            "signal {signal} to pid {pid}: {}",
            std::io::Error::last_os_error()
        )),
    }
}

/// Whether `pid` has exited (a zombie counts as exited).
pub(crate) fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            matches!(state, Some("Z" | "X"))
        }
    }
}

/// Waits up to `limit` for `pid` to exit; whether it did.
pub(crate) fn wait_gone(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if is_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    is_gone(pid)
}

/// SIGKILL, and the process gone.
pub(crate) fn kill(pid: u32) -> Result<(), String> {
    signal(pid, libc::SIGKILL)?;
    match wait_gone(pid, Duration::from_secs(10)) {
        true => Ok(()),
        false => Err(format!("pid {pid} still runs 10 s after SIGKILL")),
    }
}

/// A clean shutdown: SIGTERM, and SIGKILL when the process is still there after the grace.
pub(crate) fn stop(pid: u32) -> Result<(), String> {
    signal(pid, libc::SIGTERM)?;
    if wait_gone(pid, STOP_GRACE) {
        return Ok(());
    }
    kill(pid)?;
    Err(format!(
        "pid {pid} did not stop within {} s of SIGTERM and was killed",
        STOP_GRACE.as_secs()
    ))
}
