//! One process-wide time base: the wall clock read once, plus monotonic time elapsed since.
//! Timestamps are ns since the UNIX epoch, monotonic within the process and comparable
//! between processes on one host.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// A clock anchored at one (wall time, monotonic time) pair.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor_wall_ns: u64,
    anchor_monotonic_ns: u64,
}

/// CLOCK_MONOTONIC in ns: read on every send and acknowledgement, so read directly (vDSO,
/// no syscall) rather than through `Instant`'s checked arithmetic.
#[inline]
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Clock {
    /// The process-wide clock, anchored on first use.
    pub fn process() -> Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        *CLOCK.get_or_init(|| {
            let anchor_monotonic_ns = monotonic_ns();
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("the system clock is after 1970");
            Clock {
                anchor_wall_ns: wall.as_nanos() as u64,
                anchor_monotonic_ns,
            }
        })
    }

    /// Now, in ns since the UNIX epoch.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.anchor_wall_ns + (monotonic_ns() - self.anchor_monotonic_ns)
    }
}

/// Makes `nanosleep` on the calling thread wake up on time (the default timer slack is
/// 50 µs): producers pacing a schedule call it once on their thread.
pub fn set_precise_sleep() {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_close_to_wall_time() {
        let c = Clock::process();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128;
        assert!((wall - a as i128).abs() < 1_000_000_000);
    }
}
