//! How late this host wakes a sleeping thread, measured while a run goes on. Tests that time
//! a run widen their windows by it: on a busy host (another process on a core, a build) a
//! deadline comes late and the window grows with what was seen; on an idle host the window
//! stays as tight as written, so the test can still fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The sleep the probe asks for, each time.
const NAP: Duration = Duration::from_millis(1);

/// A thread that naps 1 ms at a time and keeps how late it woke each time.
pub struct WakeupLateness {
    stop: Arc<AtomicBool>,
    /// None once `seen` has taken it.
    thread: Option<JoinHandle<Vec<Duration>>>,
}

/// How late the probe woke: at worst, and how far behind a schedule kept on this host was at
/// the 99th percentile of the time. A wake-up `L` late leaves a steady schedule behind by
/// `L` falling to 0 over those `L`; a run's own p99 (its messages' schedule lag, sent evenly
/// in time) compares with this one: a single late wake-up barely moves it, a host late again
/// and again does.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    pub worst: Duration,
    pub p99: Duration,
}

impl WakeupLateness {
    /// Starts measuring.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut late = Vec::with_capacity(64 * 1024);
            while !flag.load(Ordering::Relaxed) {
                let asked = Instant::now();
                std::thread::sleep(NAP);
                late.push(asked.elapsed().saturating_sub(NAP));
            }
            late
        });
        WakeupLateness {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops measuring; the latest wake-up seen since the start (zero on an idle host, give
    /// or take the timer's slack).
    pub fn worst(self) -> Duration {
        self.seen().worst
    }

    /// Stops measuring; how late the wake-ups since the start were.
    pub fn seen(mut self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("taken only here");
        Seen::of(thread.join().expect("the probe thread does not panic"))
    }
}

impl Drop for WakeupLateness {
    /// A probe dropped unread stops too (its thread ends at its next wake-up).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Seen {
    /// The worst of `late`, and the `x` behind which a schedule spent 1% of the time: where
    /// the sum of `L - x` over the wake-ups later than `x` is 1% of all the time slept.
    fn of(mut late: Vec<Duration>) -> Seen {
        let ns = |d: &Duration| d.as_nanos() as f64;
        late.sort_unstable_by(|a, b| b.cmp(a));
        let total: f64 = late.iter().map(|l| ns(&NAP) + ns(l)).sum();
        let share = 0.01 * total;
        let mut sum = 0.0;
        let mut p99 = 0.0;
        for (k, l) in late.iter().enumerate() {
            sum += ns(l);
            let x = (sum - share) / (k + 1) as f64;
            let next = late.get(k + 1).map_or(0.0, ns);
            if x >= next {
                p99 = x.max(0.0);
                break;
            }
        }
        Seen {
            worst: late.first().copied().unwrap_or_default(),
            p99: Duration::from_nanos(p99 as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_late_wake_up_barely_counts_and_lateness_throughout_does() {
        let ms = Duration::from_millis;
        // 12 s of 1 ms naps woken on time, and one 18 ms late: behind for 0.15% of the time.
        let mut late = vec![Duration::ZERO; 12_000];
        late[7] = ms(18);
        let seen = Seen::of(late);
        assert_eq!((seen.worst, seen.p99), (ms(18), Duration::ZERO));
        // Every wake-up 1 ms late: behind by up to 1 ms all the time; 1% of the time by
        // more than 0.98 ms.
        let seen = Seen::of(vec![ms(1); 1000]);
        assert_eq!(seen.worst, ms(1));
        assert!((seen.p99.as_secs_f64() - 0.00098).abs() < 1e-6, "{seen:?}");
        // Ten wake-ups 100 ms late in about 1.5 s of naps: behind for two thirds of the time.
        let mut late = vec![Duration::ZERO; 500];
        late[..10].fill(ms(100));
        let seen = Seen::of(late);
        assert!(seen.p99 > ms(95) && seen.p99 < ms(100), "{seen:?}");
        assert_eq!(Seen::of(Vec::new()).worst, Duration::ZERO);
    }
}
