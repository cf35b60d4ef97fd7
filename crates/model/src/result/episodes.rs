//! The spans of a run in which the broker held it up, in seconds since the start of warm-up:
//! publishing blocked, stalls, slowdowns and outages.

use serde::{Deserialize, Serialize};

/// The broker refusing to take messages while connected, from its notice to the one that
/// lifted it (seconds since the start of warm-up; `end_s` None: still blocked at the end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub start_s: f64,
    pub end_s: Option<f64>,
    /// The broker's reason, e.g. "low on memory".
    pub reason: String,
    /// Producers it blocked.
    pub producers: u32,
}

/// Shortest run of whole seconds without an acknowledgement that counts as a stall.
pub const STALL_SECONDS: usize = 2;

/// Whole seconds of warm-up or measurement in which nothing was acknowledged though the
/// schedule had messages due and no producer had lost its connection. Times in seconds since
/// the start of warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub start_s: f64,
    pub seconds: f64,
    /// Messages handed to the client in those seconds (0 when its buffer was already full).
    pub sent: u64,
}

/// Seconds in which acknowledgements came late (publish p99 many times the run's typical p50)
/// while sends kept their schedule and every connection was up. Times in seconds since the
/// start of warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Slowdown {
    pub start_s: f64,
    pub seconds: f64,
    /// The highest per-second publish p99 in the span.
    pub publish_p99_ms: f64,
}

/// The broker lost by producers' clients (a closed connection, every broker down): from the
/// first producer finding it gone to the last of them getting an acknowledgement again.
/// Times in seconds since the start of warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outage {
    pub start_s: f64,
    /// First successful acknowledgement after it (of the last producer to get one); None when
    /// none came before the run ended.
    pub first_ack_s: Option<f64>,
    /// Producers that lost the broker.
    pub producers: u32,
    /// Messages that failed in it (in flight at the loss, or refused while it lasted).
    pub failed: u64,
}

impl Outage {
    /// From the loss to the first acknowledgement after it, seconds.
    pub fn duration_s(&self) -> Option<f64> {
        self.first_ack_s.map(|end| end - self.start_s)
    }
}
