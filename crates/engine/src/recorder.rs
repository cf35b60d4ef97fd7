//! Per-task measurement state. Each producer and consumer task owns one recorder (no shared
//! counters on the hot path), rolls its one-second interval over by itself and sends finished
//! intervals and its final result to the collector.

mod consumer;
mod interval;
mod latencies;
mod producer;
mod report;

pub(crate) use consumer::ConsumerRecorder;
pub(crate) use interval::{Interval, Times};
pub(crate) use producer::ProducerRecorder;
pub(crate) use report::{ConsumerResult, ProducerResult, Report};
