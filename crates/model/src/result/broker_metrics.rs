//! What the broker's own metrics endpoint said about a run, and how a counter's increase is
//! read across a broker restart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the broker's own metrics endpoint said about the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BrokerMetricsSummary {
    /// The endpoint scraped (http://host:port/metrics).
    pub url: String,
    /// Which metric set was read: "kafka" (JMX exporter) or "rabbitmq" (rabbitmq_prometheus).
    pub source: String,
    /// Mean of each figure over the measurement window (rates per second, gauges as read).
    pub means: BTreeMap<String, f64>,
    /// Largest value of each figure in the measurement window.
    pub maxima: BTreeMap<String, f64>,
    /// Messages the broker counted as written during the whole run (its counter's increase
    /// from just before the run to just after it; across a broker restart, which starts the
    /// counter again from 0, the increases before and after it added up).
    pub messages_in: Option<u64>,
    /// What brokerbench counted over the same span: acknowledged, or sent without confirms.
    pub messages_counted_by_brokerbench: u64,
    /// |broker − brokerbench| / brokerbench, in percent; None when not compared (the
    /// counter restarted: what was written between its last reading and the restart is not
    /// in `messages_in`).
    pub disagreement_pct: Option<f64>,
    /// Scrapes that failed.
    pub scrape_errors: u64,
    /// Times the broker's message counter went back (a broker restart).
    #[serde(default)]
    pub counter_resets: u32,
}

/// A counter's increase over readings in order, as Prometheus's `increase` takes it: a value
/// below the one before means the counter started again from 0 (a restart), so the new value
/// is all increase. Returns the increase and the number of such restarts.
pub fn counter_increase(values: impl IntoIterator<Item = f64>) -> (f64, u32) {
    let mut values = values.into_iter();
    let Some(mut last) = values.next() else {
        return (0.0, 0);
    };
    let (mut increase, mut resets) = (0.0, 0);
    for value in values {
        if value < last {
            resets += 1;
            increase += value;
        } else {
            increase += value - last;
        }
        last = value;
    }
    (increase, resets)
}

#[cfg(test)]
mod counter_tests {
    #[test]
    fn a_counter_that_restarts_is_stitched() {
        assert_eq!(super::counter_increase([]), (0.0, 0));
        assert_eq!(super::counter_increase([5.0, 9.0, 12.0]), (7.0, 0));
        assert_eq!(
            super::counter_increase([100.0, 150.0, 20.0, 70.0]),
            (120.0, 1)
        );
        assert_eq!(super::counter_increase([10.0, 0.0, 0.0, 4.0]), (4.0, 1));
    }
}
