//! The client's own CPU over the measurement window, from readings the collector takes as it
//! goes. A collector that sees an edge of the window late (its thread waited for a core
//! behind thousands of busy producer threads: 1.1 s late with 5,000 MQTT publishers) still
//! measures the window, not the moment it looked: each edge's figure lies between the last
//! reading before it and the one taken when the edge was seen, in proportion to time.

use super::*;

/// The collector reads the process's CPU at most this often: getrusage sums every thread's,
/// so with thousands of threads a reading is not free.
const READ_EVERY_NS: u64 = 10_000_000;

/// The readings, and the window's edges once seen.
#[derive(Debug, Default)]
pub(super) struct CpuWindow {
    /// The latest reading and when it was taken (the run's clock, ns).
    last: Option<(u64, Rusage)>,
    start: Option<Rusage>,
    window: Option<(Rusage, Rusage)>,
}

impl CpuWindow {
    /// Takes a reading at `now`, unless one was taken less than READ_EVERY_NS before.
    pub(super) fn read(&mut self, now: u64) {
        if self.last.is_none_or(|(at, _)| now >= at + READ_EVERY_NS) {
            self.last = Some((now, rusage()));
        }
    }

    /// The window opened at `edge_ns`; the collector saw it at `now`.
    pub(super) fn opened(&mut self, edge_ns: u64, now: u64) {
        self.start = Some(self.edge(edge_ns, now, rusage()));
    }

    /// The window closed at `edge_ns`; the collector saw it at `now`.
    pub(super) fn closed(&mut self, edge_ns: u64, now: u64) {
        if self.window.is_none() {
            if let Some(start) = self.start {
                self.window = Some((start, self.edge(edge_ns, now, rusage())));
            }
        }
    }

    /// The CPU readings at the window's start and end; None if it never opened.
    pub(super) fn window(&self) -> Option<(Rusage, Rusage)> {
        self.window
    }

    /// The figure at `edge_ns` from `reading`, taken at `now`, and the loop's last reading
    /// before it (both edges seen at once lie between the same two readings).
    fn edge(&self, edge_ns: u64, now: u64, reading: Rusage) -> Rusage {
        match self.last {
            Some((at, before)) if at < edge_ns && edge_ns < now => {
                before.toward(&reading, (edge_ns - at) as f64 / (now - at) as f64)
            }
            _ => reading,
        }
    }
}

impl Rusage {
    /// The reading `share` of the way from this one to `later` (its peak memory: `later`'s).
    fn toward(&self, later: &Rusage, share: f64) -> Rusage {
        Rusage {
            user_s: self.user_s + (later.user_s - self.user_s) * share,
            system_s: self.system_s + (later.system_s - self.system_s) * share,
            max_rss_bytes: later.max_rss_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(user_s: f64, system_s: f64) -> Rusage {
        Rusage {
            user_s,
            system_s,
            max_rss_bytes: 0,
        }
    }

    #[test]
    fn an_edge_seen_late_is_measured_where_it_was_not_where_it_was_seen() {
        let s = 1_000_000_000;
        let window = CpuWindow {
            last: Some((0, cpu(1.0, 10.0))),
            ..Default::default()
        };
        // Both edges seen at 10 s, after the reading at 0 s: the window (2 s to 7 s) had half
        // of the 10 CPU-s between the two readings, not none.
        let (now, reading) = (10 * s, cpu(2.0, 19.0));
        let start = window.edge(2 * s, now, reading);
        let end = window.edge(7 * s, now, reading);
        let used = (end.user_s + end.system_s) - (start.user_s + start.system_s);
        assert!((used - 5.0).abs() < 1e-9, "{used}");
        assert!((start.user_s - 1.2).abs() < 1e-9 && (start.system_s - 11.8).abs() < 1e-9);
        // An edge seen at once (no reading between) is the reading itself.
        let at_once = window.edge(10 * s, now, reading);
        assert_eq!((at_once.user_s, at_once.system_s), (2.0, 19.0));
    }
}
