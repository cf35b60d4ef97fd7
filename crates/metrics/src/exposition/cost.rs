//! What answering costs the process: the CPU time of the threads that answered requests,
//! added as each connection's thread ends its work (the server states it; a dashboard prints
//! it at the end). Each connection has a thread of its own, so a thread's CPU clock, which
//! starts at zero, is that connection's whole cost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Requests answered and the CPU their threads used, summed over the server's life.
#[derive(Default)]
pub(super) struct AnswerCost {
    requests: AtomicU64,
    cpu_ns: AtomicU64,
}

impl AnswerCost {
    /// Adds the calling thread's CPU so far, and a request when `request` (a connection that
    /// sent none costs CPU too).
    pub(super) fn add_this_thread(&self, request: bool) {
        self.cpu_ns.fetch_add(thread_cpu_ns(), Ordering::AcqRel);
        if request {
            self.requests.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Requests answered so far, and the CPU time spent on them.
    pub(super) fn so_far(&self) -> (u64, Duration) {
        (
            self.requests.load(Ordering::Acquire),
            Duration::from_nanos(self.cpu_ns.load(Ordering::Acquire)),
        )
    }
}

/// The calling thread's CPU time (user and system), in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_works_is_counted_and_one_that_sleeps_is_not() {
        let cost = AnswerCost::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                // Works until its own clock shows 30 ms (however busy the host).
                let mut x = 0u64;
                while thread_cpu_ns() < 30_000_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                cost.add_this_thread(true);
            });
        });
        let (requests, busy) = cost.so_far();
        assert_eq!(requests, 1);
        assert!(busy >= Duration::from_millis(30), "{busy:?}");
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                cost.add_this_thread(false);
            });
        });
        let (requests, both) = cost.so_far();
        assert_eq!(requests, 1, "a connection without a request");
        assert!(both - busy < Duration::from_millis(20), "{:?}", both - busy);
    }
}
