//! Shared vocabulary of brokerbench: validated workloads and driver configurations, units,
//! and the result types that the engine produces and the reports read.

pub mod ca_bundle;
pub mod calendar;
pub mod family;
pub mod faults;
pub mod field;
pub mod metrics_endpoint;
mod named;
pub mod omb;
pub mod reconnect;
pub mod redact;
pub mod resources;
pub mod result;
pub mod spec;
pub mod units;
pub mod workload;
pub mod yaml;

pub use family::{DriverConfig, DriverSchema};
pub use metrics_endpoint::MetricsEndpointSpec;
pub use result::*;
pub use spec::{load_specs, load_specs_from, SpecError, SpecInput, Specs};
pub use workload::*;

/// Length in bytes of the envelope header that starts every message payload: format version
/// (1 byte), 3 reserved bytes, producer id (u32), sequence number (u64), intended send time
/// (u64 ns since the UNIX epoch), all little-endian.
pub const ENVELOPE_HEADER_LEN: usize = 24;
