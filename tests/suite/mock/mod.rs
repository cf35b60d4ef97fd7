//! What runs on the in-memory mock family (`driver: mock`): the broker is only a vehicle for
//! what is tested (results, reports, studies, signals, shards), so no broker's start or
//! speed stands in the way.

mod report;
mod runs;
mod shards;
mod signals;
pub mod study;
