//! Where a client is in getting its lost connection back: when the loss was found, and when
//! the next attempt is due under the driver file's `reconnect` backoff. Shared by the
//! families whose client brokerbench drives itself (RabbitMQ, NATS, Artemis, Pulsar, Redis).

use std::time::{Duration, Instant};

use brokerbench_model::reconnect::Reconnect;

use crate::Clock;

#[derive(Debug, Default)]
pub struct Redial {
    /// When the loss was found, ns since the UNIX epoch; None while connected.
    since_ns: Option<u64>,
    /// Attempts that failed in a row.
    failures: u32,
    next_attempt: Option<Instant>,
}

impl Redial {
    /// Notes the loss (once), now.
    pub fn lost(&mut self) {
        self.since_ns
            .get_or_insert_with(|| Clock::process().now_ns());
    }

    /// When the loss was found, while it lasts ([`crate::Producer::disconnected_since`]).
    pub fn since_ns(&self) -> Option<u64> {
        self.since_ns
    }

    /// Whether an attempt is due now.
    pub fn due(&self) -> bool {
        self.next_attempt.is_none_or(|at| Instant::now() >= at)
    }

    /// How long until the next attempt.
    pub fn wait(&self) -> Duration {
        self.next_attempt.map_or(Duration::ZERO, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }

    /// An attempt failed: the next one waits the policy's backoff.
    pub fn failed(&mut self, policy: &Reconnect) {
        self.failures = self.failures.saturating_add(1);
        self.next_attempt = Some(Instant::now() + policy.backoff(self.failures));
    }

    /// Connected again.
    pub fn succeeded(&mut self) {
        *self = Redial::default();
    }

    /// One attempt when due under `policy` (else waits up to `timeout` for it): what
    /// `connect` made, or None (a failed attempt backs off). Off, it only waits.
    pub fn attempt<T>(
        &mut self,
        policy: &Reconnect,
        timeout: Duration,
        connect: impl FnOnce() -> Option<T>,
    ) -> Option<T> {
        if !policy.enabled {
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
            return None;
        }
        if !self.due() {
            std::thread::sleep(timeout.min(self.wait()));
            return None;
        }
        let made = connect();
        match made {
            Some(_) => self.succeeded(),
            None => self.failed(policy),
        }
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_back_off_and_success_forgets_the_loss() {
        let policy = Reconnect {
            enabled: true,
            initial_backoff: Duration::from_millis(40),
            max_backoff: Duration::from_millis(80),
        };
        let mut r = Redial::default();
        assert!(r.due() && r.since_ns().is_none());
        r.lost();
        let since = r.since_ns().unwrap();
        r.lost();
        assert_eq!(r.since_ns(), Some(since), "the first finding counts");
        r.failed(&policy);
        assert!(!r.due() && r.wait() <= Duration::from_millis(40));
        std::thread::sleep(Duration::from_millis(45));
        assert!(r.due());
        r.failed(&policy);
        r.failed(&policy);
        assert!(
            r.wait() > Duration::from_millis(40),
            "capped at 80 ms, above 40"
        );
        r.succeeded();
        assert!(r.due() && r.since_ns().is_none());
    }

    #[test]
    fn an_attempt_connects_when_due_and_backs_off_when_it_fails() {
        let mut policy = Reconnect {
            enabled: true,
            initial_backoff: Duration::from_secs(60),
            max_backoff: Duration::from_secs(60),
        };
        let mut r = Redial::default();
        r.lost();
        assert_eq!(r.attempt(&policy, Duration::ZERO, || None::<u32>), None);
        // Backing off: not even asked.
        assert_eq!(
            r.attempt(&policy, Duration::ZERO, || panic!("not due")),
            None::<u32>
        );
        let mut r = Redial::default();
        r.lost();
        assert_eq!(r.attempt(&policy, Duration::ZERO, || Some(7)), Some(7));
        assert!(r.since_ns().is_none());
        policy.enabled = false;
        assert_eq!(
            r.attempt(&policy, Duration::ZERO, || panic!("off")),
            None::<u32>
        );
    }
}
