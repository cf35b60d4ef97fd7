//! Studies: a grid of settings × repetitions expanded into ordinary runs, the tables and
//! statistics over their summaries, and the search for the maximum sustainable throughput.
//!
//! This crate plans and evaluates; it never runs a broker. The CLI carries out each planned
//! run as an ordinary `brokerbench run` and hands its results folder back here.

pub mod broker;
pub mod cover;
pub mod file;
pub mod metrics;
pub mod plan;
pub mod search;
pub mod secrets;
pub mod stats;
pub mod tables;
mod text;

pub use broker::BrokerChoice;
pub use file::{Axis, BetweenRuns, BrokerBetween, OnFailure, Order, Study, StudyError, StudyInput};
pub use plan::{plan_runs, PlannedRun, RunKey};
pub use text::flow_text;
