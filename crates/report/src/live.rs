//! The live status line: one line on stderr, rewritten every second, only on a terminal.

use std::io::{self, IsTerminal, Write};

use brokerbench_model::units::format_nanos;
use brokerbench_model::{IntervalRow, RunObserver};

use crate::terminal::group_thousands;

/// Erases the current terminal line and returns the cursor to its start.
const CLEAR_LINE: &str = "\r\x1b[2K";

/// Shows the progress of a run on stderr; writes nothing when disabled or when stderr is not
/// a terminal (logs and pipes stay clean).
pub struct LiveLine {
    active: bool,
    shown: bool,
}

impl LiveLine {
    /// A live line that is active only if `enabled` and stderr is a terminal.
    pub fn new(enabled: bool) -> Self {
        LiveLine {
            active: enabled && io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Whether the line will be drawn at all.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Clears the line, so that the final summary starts on a clean line.
    pub fn finish(&mut self) {
        if self.active && self.shown {
            let mut stderr = io::stderr().lock();
            let _ = write!(stderr, "{CLEAR_LINE}");
            let _ = stderr.flush();
            self.shown = false;
        }
    }
}

impl Drop for LiveLine {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Text of the live line for one second, e.g.
/// `  12 s  measurement  49,998 msg/s  p99 1.23 ms  backlog 120`.
pub(crate) fn live_text(row: &IntervalRow) -> String {
    let p99 = if row.publish.is_empty() {
        "-".to_string()
    } else {
        format_nanos(row.publish.value_at_quantile(0.99))
    };
    let mut text = format!(
        "{:>4} s  {:<11}  {:>9} msg/s  p99 {:>9}",
        row.second + 1,
        row.phase.as_str(),
        group_thousands(row.acknowledged),
        p99
    );
    if let Some(backlog) = row.backlog {
        let sign = if backlog < 0 { "-" } else { "" };
        text.push_str(&format!(
            "  backlog {sign}{}",
            group_thousands(backlog.unsigned_abs())
        ));
    }
    if row.failed > 0 {
        text.push_str(&format!("  failed {}", group_thousands(row.failed)));
    }
    text
}

impl RunObserver for LiveLine {
    fn interval(&mut self, row: &IntervalRow) {
        if !self.active {
            return;
        }
        let mut stderr = io::stderr().lock();
        let _ = write!(stderr, "{CLEAR_LINE}{}", live_text(row));
        let _ = stderr.flush();
        self.shown = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::row;

    #[test]
    fn text() {
        let mut r = row(11, 0);
        r.acknowledged = 49_998;
        r.publish.record(1_230_000).unwrap();
        r.backlog = Some(120);
        assert_eq!(
            live_text(&r),
            "  12 s  measurement     49,998 msg/s  p99   1.23 ms  backlog 120  failed 1"
        );
        r.backlog = None;
        r.failed = 0;
        r.publish.reset();
        assert_eq!(
            live_text(&r),
            "  12 s  measurement     49,998 msg/s  p99         -"
        );
    }

    #[test]
    fn disabled_is_silent() {
        let mut line = LiveLine::new(false);
        assert!(!line.is_active());
        line.interval(&row(0, 0));
        line.finish();
    }
}
