//! How the shards of a run meet: shard 0 coordinates over TCP, the others connect to it.
//!
//! One line of JSON per message. A shard says hello (its index, the run id and a digest of
//! its workload, so that shards of different runs or workloads never mix), measures its
//! clock against the coordinator's (the round trip with the least delay of a few pings), then
//! reports its consumers' assignments until the coordinator — every shard arrived and every
//! subscription's consumers, over all shards, ready — names one start time. In the drain each
//! shard reports what its producers had acknowledged and its consumers received, until the
//! coordinator says everything was received; at the end each says it finished, and shard 0,
//! which removes what the run created, waits for them.

mod coordinator;
mod gate;
mod member;
mod protocol;

pub use coordinator::Coordinator;
pub use gate::TcpGate;
pub use member::Member;
pub use protocol::{identity, ClockEstimate, GateSettings};
