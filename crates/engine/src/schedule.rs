//! Intended send times. The schedule never looks at the broker: message i of a producer is due
//! at its time whether or not earlier messages were acknowledged.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

use brokerbench_model::Arrival;

/// Yields the intended send times of one producer, in ns since the UNIX epoch.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Evenly spaced: `start + i * 1e9 / rate`, computed from i each time so no error accumulates.
    Uniform {
        start_ns: u64,
        rate: f64,
        index: u64,
    },
    /// Exponentially distributed gaps with mean `1e9 / rate` ns. The sum of the gaps is kept
    /// apart from the start: at ns since the UNIX epoch (about 1.8e18) an f64 resolves only
    /// 256 ns, while the sum alone stays exact to well under 1 ns for days.
    Poisson {
        start_ns: u64,
        elapsed_ns: f64,
        gaps: Exp<f64>,
        rng: Box<StdRng>,
    },
}

impl Schedule {
    /// A schedule of `rate` messages per second starting at `start_ns`.
    pub fn new(arrival: Arrival, rate: f64, start_ns: u64, seed: u64) -> Schedule {
        match arrival {
            Arrival::Uniform => Schedule::Uniform {
                start_ns,
                rate,
                index: 0,
            },
            Arrival::Poisson => Schedule::Poisson {
                start_ns,
                elapsed_ns: 0.0,
                gaps: Exp::new(rate / 1e9).expect("rate is positive"),
                rng: Box::new(StdRng::seed_from_u64(seed)),
            },
        }
    }

    /// The next intended send time.
    #[inline]
    pub fn next_ns(&mut self) -> u64 {
        match self {
            Schedule::Uniform {
                start_ns,
                rate,
                index,
            } => {
                let t = *start_ns + (*index as f64 * 1e9 / *rate) as u64;
                *index += 1;
                t
            }
            Schedule::Poisson {
                start_ns,
                elapsed_ns,
                gaps,
                rng,
            } => {
                let t = *start_ns + *elapsed_ns as u64;
                *elapsed_ns += gaps.sample(rng.as_mut());
                t
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_times_are_exact() {
        let mut s = Schedule::new(Arrival::Uniform, 50_000.0, 1_000, 0);
        for i in 0..1_000_000u64 {
            assert_eq!(s.next_ns(), 1_000 + i * 20_000);
        }
        let mut s = Schedule::new(Arrival::Uniform, 3.0, 0, 0);
        let times: Vec<u64> = (0..4).map(|_| s.next_ns()).collect();
        assert_eq!(times, vec![0, 333_333_333, 666_666_666, 1_000_000_000]);
    }

    /// A start time as the engine gives it: ns since the UNIX epoch, in 2026.
    const NOW_NS: u64 = 1_795_500_000_123_456_789;

    #[test]
    fn poisson_has_the_right_mean_and_spread() {
        let rate = 10_000.0;
        let mut s = Schedule::new(Arrival::Poisson, rate, NOW_NS, 42);
        let n = 200_000;
        let times: Vec<u64> = (0..=n).map(|_| s.next_ns()).collect();
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let expected = 1e9 / rate;
        assert!(
            (mean - expected).abs() / expected < 0.01,
            "mean gap {mean} vs {expected}"
        );
        // An exponential distribution's standard deviation equals its mean.
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            (var.sqrt() - expected).abs() / expected < 0.02,
            "sd {}",
            var.sqrt()
        );
        assert!(times.windows(2).all(|w| w[1] >= w[0]));
    }

    #[test]
    fn poisson_is_reproducible_from_the_seed_and_differs_between_seeds() {
        let times = |seed| {
            let mut s = Schedule::new(Arrival::Poisson, 100.0, NOW_NS, seed);
            (0..100).map(|_| s.next_ns()).collect::<Vec<u64>>()
        };
        assert_eq!(times(7), times(7));
        let (a, b) = (times(7), times(8));
        assert_eq!(a[0], b[0], "both start at the start");
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert_eq!(same, 1, "another seed, other gaps");
    }

    #[test]
    fn poisson_keeps_nanoseconds_at_real_start_times() {
        // At 1M msg/s the mean gap is 1,000 ns; summed as f64 ns since the epoch, every time
        // would be a multiple of 256 ns after the start.
        let mut s = Schedule::new(Arrival::Poisson, 1_000_000.0, NOW_NS, 3);
        let times: Vec<u64> = (0..100_000).map(|_| s.next_ns()).collect();
        assert_eq!(
            times[0], NOW_NS,
            "the first message at the start, to the ns"
        );
        let off_grid = times
            .windows(2)
            .filter(|w| (w[1] - w[0]) % 256 != 0)
            .count();
        assert!(
            off_grid > 90_000,
            "{off_grid} of 99,999 gaps off a 256 ns grid"
        );
        let mean = (times[times.len() - 1] - times[0]) as f64 / (times.len() - 1) as f64;
        assert!((mean - 1000.0).abs() < 20.0, "mean gap {mean} ns");
    }
}
