//! What a run produces: per-second interval rows while it runs, and a summary at the end.
//! Latencies are nanoseconds; counts are messages; rates are per second.

mod broker_metrics;
mod counts;
mod episodes;
mod integrity;
mod interval;
mod latency;
mod summary;

pub use broker_metrics::*;
pub use counts::*;
pub use episodes::*;
pub use integrity::*;
pub use interval::*;
pub use latency::*;
pub use summary::*;
