//! Faults on schedule: a workload's `faults:` carried out against the broker's nodes while a
//! run measures (kill, stop, pause, a network partition, the user's own command), each undone or its node started
//! again on time and at the latest when the run ends, then measured from the run's own
//! records: how long producers got no acknowledgement, when the rate came back, latency
//! before and during. What a node is comes from the caller ([`Nodes`]): the managed broker's
//! processes, so that this crate knows no broker.

mod command;
mod inject;
mod measure;
mod nodes;
mod partition;
mod schedule;

pub use inject::{Injected, Injector};
pub use measure::{measure, notes, Findings, RunRecord};
pub use nodes::{Leader, Nodes};
pub use partition::{check as partitions_possible, sweep as sweep_partitions};
pub use schedule::check;
