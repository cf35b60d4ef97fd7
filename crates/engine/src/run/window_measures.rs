//! The measurement window's figures beyond the counts: the client's cost, the run's mode and
//! target rate, and what limited the send rate when the schedule lag kept growing.

use super::*;

/// The client's CPU over the window, per million `messages`, and its peak memory.
pub(super) fn client_cost(cpu: Option<(Rusage, Rusage)>, messages: u64) -> ClientCost {
    let Some((start, end)) = cpu else {
        return ClientCost {
            peak_rss_bytes: rusage().max_rss_bytes,
            ..ClientCost::default()
        };
    };
    let user = end.user_s - start.user_s;
    let system = end.system_s - start.system_s;
    ClientCost::of(user, system, end.max_rss_bytes, messages)
}

/// What limited the send rate when the schedule lag kept growing.
pub(super) struct Bound {
    /// Sends waited for the client's buffer of unacknowledged messages: acknowledgements came
    /// too slowly.
    pub(super) broker: bool,
    /// The load generator or the client's buffer itself.
    pub(super) client: bool,
    /// The share of the window sends waited for room in the buffer, per producer.
    buffer_full_share: f64,
}

impl Bound {
    pub(super) fn of(
        workload: &Workload,
        lag_per_second: &[u64],
        producers: &[ProducerResult],
        measurement_s: f64,
        anomalies: &Anomalies,
    ) -> Self {
        // Lag that grew while the broker was gone, stalled or blocking is that's doing; its
        // note says so.
        let lag_grew = workload.rate != Rate::Max
            && client_bound(lag_per_second)
            && !anomalies.broker_held_up();
        // Lag that grew while sends waited for room in the client's buffer of unacknowledged
        // messages is the acknowledgements' doing, not the generator's.
        let window_ns = (measurement_s * 1e9).max(1.0);
        let buffer_full_share = producers
            .iter()
            .map(|p| p.buffer_full_ns as f64 / window_ns)
            .sum::<f64>()
            / producers.len().max(1) as f64;
        let broker = lag_grew && buffer_full_share >= BROKER_BOUND_SHARE;
        Bound {
            broker,
            client: lag_grew && !broker,
            buffer_full_share,
        }
    }

    pub(super) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.broker {
            notes.push(format!(
                "BROKER-BOUND: schedule lag kept growing because sends waited for room in the client's buffer of unacknowledged messages {:.0}% of the window: acknowledgements came more slowly than the target rate, so the broker (or the client library's connection to it), not the load generator, limited the send rate",
                self.buffer_full_share * 100.0
            ));
        }
        if self.client {
            notes.push(
                "CLIENT-BOUND: schedule lag kept growing, so the load generator or the client's buffer, not the broker, limited the send rate; the offered load was below the target".into(),
            );
        }
        notes
    }
}

/// The run's mode and its target rate (a shard's target is its producers' share).
pub(super) fn mode_and_target(
    workload: &Workload,
    shard: Option<Shard>,
    producer_ids: &[u32],
) -> (&'static str, Option<f64>) {
    match workload.rate {
        Rate::Max => ("max-rate", None),
        Rate::PerSecond(rate) if shard.is_some() => (
            "open-loop",
            Some(rate * producer_ids.len() as f64 / workload.producer_count().max(1) as f64),
        ),
        Rate::PerSecond(rate) => ("open-loop", Some(rate)),
    }
}
