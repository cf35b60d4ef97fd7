//! The engine: turns a validated workload into load on a driver and measurements. It owns the
//! schedule of intended send times, the producer and consumer tasks, the phases, the
//! per-task histograms and interval counters, and the delivery ledger.

pub mod ledger;
pub mod meter;
pub mod payload;
mod recorder;
mod run;
pub mod schedule;
pub mod sensor;
pub mod shard;

pub use brokerbench_driver::Clock;
pub use run::{complete, run, run_shard, EngineError, Measured, RunControl, RunOutcome, Sharding};
