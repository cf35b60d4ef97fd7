//! Connecting again after a lost connection (the broker restarted, or was killed and started
//! again), under the driver file's `reconnect` backoff. A family gives what it connects to
//! and how (its address, and what else a new connection needs, such as a client id or a
//! subscription to make again); this keeps when to try.

use std::time::Duration;

use brokerbench_model::reconnect::Reconnect;

use crate::Redial;

/// How long one attempt to connect again (and set up again) may take.
pub const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// A producer's or consumer's way back to its broker: `T` is what it connects to, `C` the
/// connection it gets.
pub struct Reconnector<C, T> {
    target: T,
    connect: fn(&T) -> Option<C>,
    pub policy: Reconnect,
    pub redial: Redial,
}

impl<C, T> Reconnector<C, T> {
    /// Connects to `target` by `connect` when an attempt is due under `policy`.
    pub fn new(target: T, policy: Reconnect, connect: fn(&T) -> Option<C>) -> Self {
        Reconnector {
            target,
            connect,
            policy,
            redial: Redial::default(),
        }
    }

    /// What it connects to.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// The connection is gone: from now on the producer or consumer counts as disconnected.
    pub fn lost(&mut self) {
        if self.policy.enabled {
            self.redial.lost();
        }
    }

    /// One attempt when due (else waits up to `timeout` for it): a new connection, or None.
    /// Off, it only waits.
    pub fn attempt(&mut self, timeout: Duration) -> Option<C> {
        self.attempt_then(timeout, |_| Ok::<(), ()>(()))
    }

    /// [`Self::attempt`], the new connection kept only if `setup` accepts it (a refused one
    /// is a failed attempt, and backs off).
    pub fn attempt_then<E>(
        &mut self,
        timeout: Duration,
        setup: impl FnOnce(&mut C) -> Result<(), E>,
    ) -> Option<C> {
        let (target, connect) = (&self.target, self.connect);
        self.redial.attempt(&self.policy, timeout, || {
            let mut conn = connect(target)?;
            setup(&mut conn).ok().map(|()| conn)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(enabled: bool) -> Reconnect {
        Reconnect {
            enabled,
            initial_backoff: Duration::from_secs(60),
            max_backoff: Duration::from_secs(60),
        }
    }

    /// A "connection" to `target`: its number, or none for 0.
    fn dial(target: &u32) -> Option<u32> {
        (*target > 0).then_some(*target)
    }

    #[test]
    fn a_due_attempt_connects_to_the_target_and_ends_the_loss() {
        let mut r = Reconnector::new(7, policy(true), dial);
        r.lost();
        assert!(r.redial.since_ns().is_some());
        assert_eq!(r.attempt(Duration::ZERO), Some(7));
        assert_eq!((*r.target(), r.redial.since_ns()), (7, None));
    }

    #[test]
    fn a_connection_its_setup_refuses_is_a_failed_attempt_that_backs_off() {
        let mut r = Reconnector::new(7, policy(true), dial);
        r.lost();
        assert_eq!(r.attempt_then(Duration::ZERO, |_| Err("refused")), None);
        assert!(!r.redial.due(), "backing off");
        assert_eq!(
            r.attempt(Duration::ZERO),
            None,
            "not asked while backing off"
        );
        assert!(r.redial.since_ns().is_some());
    }

    #[test]
    fn off_a_loss_is_not_counted_and_nothing_is_tried() {
        let mut r = Reconnector::new(7, policy(false), dial);
        r.lost();
        assert_eq!(r.redial.since_ns(), None);
        assert_eq!(r.attempt(Duration::ZERO), None);
    }
}
