//! The in-memory mock family: `driver: mock` runs brokerbench against queues inside its own
//! process ([`brokerbench_driver::mock::MockDriver`]), with the faults its driver file asks for.
//! It stands in for a broker where the broker is only a vehicle (the CLI, reports, studies,
//! signals), and measures brokerbench's own ceiling; it never stands for a broker's figures.

pub mod config;
mod family;
mod managed;

pub use family::{MockFamily, FAMILY};
