//! What answering costs the process: the CPU time of the threads that answered requests,
//! summed as each connection ends (the server states it; a dashboard prints it at the end).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Requests answered and the CPU their threads used, summed over the server's life.
#[derive(Default)]
pub(super) struct AnswerCost {
    connections: AtomicU64,
    cpu_ns: AtomicU64,
}

impl AnswerCost {
    /// Counts the calling thread's CPU from now until the returned guard is dropped.
    pub(super) fn measure(&self) -> Measuring<'_> {
        Measuring {
            cost: self,
            began_ns: thread_cpu_ns(),
        }
    }

    /// Connections served so far, and the CPU time spent on them.
    pub(super) fn so_far(&self) -> (u64, Duration) {
        (
            self.connections.load(Ordering::Acquire),
            Duration::from_nanos(self.cpu_ns.load(Ordering::Acquire)),
        )
    }
}

/// One connection's CPU being counted; added to the sum when dropped (a panic too).
pub(super) struct Measuring<'a> {
    cost: &'a AnswerCost,
    began_ns: u64,
}

impl Drop for Measuring<'_> {
    fn drop(&mut self) {
        let used = thread_cpu_ns().saturating_sub(self.began_ns);
        self.cost.cpu_ns.fetch_add(used, Ordering::AcqRel);
        self.cost.connections.fetch_add(1, Ordering::AcqRel);
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
        {
            let _m = cost.measure();
            let began = std::time::Instant::now();
            let mut x = 0u64;
            while began.elapsed() < Duration::from_millis(30) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        let (connections, busy) = cost.so_far();
        assert_eq!(connections, 1);
        assert!(busy > Duration::from_millis(5), "{busy:?}");
        {
            let _m = cost.measure();
            std::thread::sleep(Duration::from_millis(100));
        }
        let (connections, both) = cost.so_far();
        assert_eq!(connections, 2);
        assert!(both - busy < Duration::from_millis(20), "{:?}", both - busy);
    }
}
