//! Kafka's one-minute rate, computed the way Kafka's (Yammer) meter computes
//! MessagesInPerSec's OneMinuteRate: counts are folded in on 5-second ticks into an
//! exponentially weighted moving average with alpha = 1 − exp(−5/60); the first tick sets
//! the rate to that tick's instant rate.

/// Seconds between ticks.
pub const TICK_SECONDS: u64 = 5;

/// The one-minute exponentially weighted rate.
#[derive(Debug, Clone, Default)]
pub struct OneMinuteRate {
    rate: Option<f64>,
    uncounted: u64,
    seconds: u64,
}

impl OneMinuteRate {
    pub fn alpha() -> f64 {
        1.0 - (-(TICK_SECONDS as f64) / 60.0).exp()
    }

    /// Adds one second's count; every fifth second the average ticks.
    pub fn add_second(&mut self, count: u64) {
        self.uncounted += count;
        self.seconds += 1;
        if self.seconds.is_multiple_of(TICK_SECONDS) {
            let instant = self.uncounted as f64 / TICK_SECONDS as f64;
            self.uncounted = 0;
            self.rate = Some(match self.rate {
                None => instant,
                Some(rate) => rate + Self::alpha() * (instant - rate),
            });
        }
    }

    /// Events per second; 0 before the first tick, as Kafka reports it.
    pub fn rate(&self) -> f64 {
        self.rate.unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_hand_computed_values() {
        let mut m = OneMinuteRate::default();
        for _ in 0..4 {
            m.add_second(1000);
            assert_eq!(m.rate(), 0.0, "no tick yet");
        }
        m.add_second(1000);
        assert_eq!(m.rate(), 1000.0, "first tick takes the instant rate");
        for _ in 0..5 {
            m.add_second(0);
        }
        // 1000 + alpha * (0 - 1000) = 1000 * exp(-5/60) = 920.04441462...
        assert!((m.rate() - 920.044_414_629).abs() < 1e-6, "{}", m.rate());
        for _ in 0..5 {
            m.add_second(2000);
        }
        // 920.0444 + alpha * (2000 - 920.0444), alpha = 1 - exp(-5/60) = 0.07995558537...
        let expected = 920.044_414_629 + 0.079_955_585_371 * (2000.0 - 920.044_414_629);
        assert!(
            (m.rate() - expected).abs() < 1e-6,
            "{} vs {expected}",
            m.rate()
        );
    }

    #[test]
    fn converges_to_a_steady_rate() {
        let mut m = OneMinuteRate::default();
        m.add_second(0);
        for _ in 0..4 {
            m.add_second(0);
        }
        for _ in 0..1200 {
            m.add_second(500);
        }
        assert!((m.rate() - 500.0).abs() < 0.01);
    }
}
