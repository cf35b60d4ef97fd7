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

/// A thread that naps 1 ms at a time and keeps the latest wake-up it saw.
pub struct WakeupLateness {
    stop: Arc<AtomicBool>,
    /// None once `worst` has taken it.
    thread: Option<JoinHandle<Duration>>,
}

impl WakeupLateness {
    /// Starts measuring.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                let asked = Instant::now();
                std::thread::sleep(NAP);
                worst = worst.max(asked.elapsed().saturating_sub(NAP));
            }
            worst
        });
        WakeupLateness {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops measuring; the latest wake-up seen since the start (zero on an idle host, give
    /// or take the timer's slack).
    pub fn worst(mut self) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("taken only here");
        thread.join().expect("the probe thread does not panic")
    }
}

impl Drop for WakeupLateness {
    /// A probe dropped unread stops too (its thread ends at its next wake-up).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
