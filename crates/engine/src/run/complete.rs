//! Completing a run's summary with what was measured outside the engine (allocations,
//! resources, the broker's own metrics) and the notes those call for.

use super::*;

/// What is measured outside the engine and belongs in the summary.
#[derive(Debug, Default)]
pub struct Measured {
    /// Heap allocations per message in the measurement window (`--count-allocations`).
    pub allocations_per_message: Option<f64>,
    /// CPU, memory, disk and network of the client, the broker and the host.
    pub resources: Option<brokerbench_model::resources::ResourceSummary>,
    /// The broker's own figures, and its count set against brokerbench's.
    pub broker_metrics: Option<brokerbench_model::BrokerMetricsSummary>,
    /// One shard of a run: the broker counts every shard's messages, this shard only its own.
    pub sharded: bool,
}

/// Completes `summary` with what was measured outside the engine and the notes it calls for;
/// after this the summary is final.
pub fn complete(summary: &mut Summary, measured: Measured) {
    if measured.allocations_per_message.is_some() {
        summary.client.allocations_per_message = measured.allocations_per_message;
    }
    if let Some(m) = measured
        .broker_metrics
        .as_ref()
        .filter(|m| m.counter_resets > 0)
    {
        summary.notes.push(format!(
            "the broker's message counter started again from 0 ({} time{}: a broker restart); it counted {} messages over the run with the restarts stitched, not compared with brokerbench's {}: what was written between its last reading and each restart is not in it",
            m.counter_resets,
            if m.counter_resets == 1 { "" } else { "s" },
            m.messages_in.unwrap_or(0),
            m.messages_counted_by_brokerbench
        ));
    }
    if let Some(m) = &measured.broker_metrics {
        if let (Some(apart), Some(broker_count)) = (m.disagreement_pct, m.messages_in) {
            if apart > 1.0 && measured.sharded {
                summary.notes.push(format!(
                    "the broker counted {broker_count} messages written, every shard's; this shard acknowledged {} (`brokerbench merge` sets the broker's count against all shards')",
                    m.messages_counted_by_brokerbench
                ));
            } else if apart > 1.0 {
                summary.notes.push(format!(
                    "the broker counted {broker_count} messages written and brokerbench {}: {apart:.1}% apart (other clients, or messages the broker wrote but did not acknowledge?)",
                    m.messages_counted_by_brokerbench
                ));
            }
        }
    }
    if let Some(r) = &measured.resources {
        summary.notes.extend(r.notes.iter().cloned());
    }
    if measured.resources.is_some() {
        summary.resources = measured.resources;
    }
    if measured.broker_metrics.is_some() {
        summary.broker_metrics = measured.broker_metrics;
    }
}
