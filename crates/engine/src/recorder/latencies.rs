//! A task's latencies as it holds them: the values themselves while they are few, a histogram
//! once they are many, so that a many-topic run does not pay a histogram per task per second.

use hdrhistogram::Histogram;

use brokerbench_model::{new_histogram, record_clamped};

/// A task's latencies of one second, or of its measurement window: the values themselves
/// while they are few, a histogram once they are many. A task of a many-topic run records a
/// hundred values a second; a histogram of brokerbench's range and precision is a quarter of a
/// megabyte, and sending and merging two of them per task per second cost more than the
/// messages did at 100 topics and ran a 1,000-topic run out of memory; four of them per task
/// for the window made the client's memory grow with the topics (128 MiB at 100). The values
/// go into the same histograms in the end.
#[derive(Debug, Clone)]
pub(crate) enum Latencies {
    /// Clamped values, at most [`FEW_LATENCIES`].
    Few(Vec<u64>),
    Many(Box<Histogram<u64>>),
}

/// How many values a second's latencies keep as they are before they become a histogram.
const FEW_LATENCIES: usize = 2048;

impl Default for Latencies {
    fn default() -> Self {
        Latencies::Few(Vec::new())
    }
}

impl Latencies {
    #[inline]
    pub fn record(&mut self, nanos: u64) {
        match self {
            Latencies::Many(histogram) => record_clamped(histogram, nanos),
            Latencies::Few(values) if values.len() < FEW_LATENCIES => values.push(nanos.clamp(
                brokerbench_model::HISTOGRAM_LOW,
                brokerbench_model::HISTOGRAM_HIGH,
            )),
            Latencies::Few(_) => record_clamped(self.histogram(), nanos),
        }
    }

    /// Number of values recorded.
    #[cfg(test)]
    pub fn len(&self) -> u64 {
        match self {
            Latencies::Few(values) => values.len() as u64,
            Latencies::Many(histogram) => histogram.len(),
        }
    }

    /// The value at quantile `q` (0 to 1); 0 when there is none.
    pub fn quantile(&self, q: f64) -> u64 {
        match self {
            Latencies::Few(values) if values.is_empty() => 0,
            Latencies::Few(values) => {
                let mut sorted = values.clone();
                sorted.sort_unstable();
                let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
                sorted[rank - 1]
            }
            Latencies::Many(histogram) => histogram.value_at_quantile(q),
        }
    }

    /// Adds every value of `other`.
    pub fn add(&mut self, other: &Latencies) {
        match (&mut *self, other) {
            (Latencies::Few(values), Latencies::Few(more))
                if values.len() + more.len() <= FEW_LATENCIES =>
            {
                values.extend_from_slice(more)
            }
            (_, Latencies::Few(more)) => {
                let histogram = self.histogram();
                for &v in more {
                    record_clamped(histogram, v);
                }
            }
            (_, Latencies::Many(more)) => self
                .histogram()
                .add(&**more)
                .expect("same histogram bounds"),
        }
    }

    /// Adds every value to `histogram`.
    pub fn add_to(&self, histogram: &mut Histogram<u64>) {
        match self {
            Latencies::Few(values) => {
                for &v in values {
                    record_clamped(histogram, v);
                }
            }
            Latencies::Many(more) => histogram.add(&**more).expect("same histogram bounds"),
        }
    }

    /// The values as a histogram.
    pub fn into_histogram(mut self) -> Histogram<u64> {
        self.histogram();
        match self {
            Latencies::Many(histogram) => *histogram,
            Latencies::Few(_) => unreachable!("made a histogram above"),
        }
    }

    /// The histogram, made from the values first if there is none yet.
    fn histogram(&mut self) -> &mut Histogram<u64> {
        if let Latencies::Few(values) = self {
            let mut histogram = new_histogram();
            for &v in values.iter() {
                record_clamped(&mut histogram, v);
            }
            *self = Latencies::Many(Box::new(histogram));
        }
        match self {
            Latencies::Many(histogram) => histogram,
            Latencies::Few(_) => unreachable!("made a histogram above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_beyond_the_range_are_clamped_not_dropped() {
        let mut h = new_histogram();
        record_clamped(&mut h, 0);
        record_clamped(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
    }
}
