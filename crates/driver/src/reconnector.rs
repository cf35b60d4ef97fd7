//! Connecting again after a lost connection (the broker restarted, or was killed and started
//! again), under the driver file's `reconnect` backoff. A family gives what it connects to
//! and how (its address, and what else a new connection needs, such as a client id or a
//! subscription to make again); this keeps when to try.

use std::time::Duration;

use brokerbench_model::reconnect::Reconnect;

use crate::{Envelope, Redial, SendError};

/// How long one attempt to connect again (and set up again) may take.
pub const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// A producer's or consumer's way back to its broker: `T` is what it connects to, `C` the
/// connection it gets. It knows whether the connection is lost, and as what kind of failure.
pub struct Reconnector<C, T> {
    target: T,
    connect: fn(&T) -> Option<C>,
    pub policy: Reconnect,
    pub redial: Redial,
    lost_as: Option<String>,
}

impl<C, T> Reconnector<C, T> {
    /// Connects to `target` by `connect` when an attempt is due under `policy`.
    pub fn new(target: T, policy: Reconnect, connect: fn(&T) -> Option<C>) -> Self {
        Reconnector {
            target,
            connect,
            policy,
            redial: Redial::default(),
            lost_as: None,
        }
    }

    /// What it connects to.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// What it connects to, to change (NATS's pool learns the servers a new connection
    /// announces).
    pub fn target_mut(&mut self) -> &mut T {
        &mut self.target
    }

    /// The connection is gone, a failure of the kind `kind` (what is in flight on it fails
    /// as): from now on the producer or consumer counts as disconnected.
    pub fn lose(&mut self, kind: &str) {
        self.lost_as = Some(kind.to_string());
        if self.policy.enabled {
            self.redial.lost();
        }
    }

    /// The kind of failure the connection was lost as, while it is lost.
    pub fn lost_as(&self) -> Option<&str> {
        self.lost_as.as_deref()
    }

    /// Whether the connection is lost (and not yet made again).
    pub fn is_lost(&self) -> bool {
        self.lost_as.is_some()
    }

    /// A send refused as `kind` because the connection is lost: one to wait out while the
    /// policy reconnects, else a failure.
    pub fn unavailable(&self, kind: &str) -> SendError {
        SendError::lost(&self.policy, kind.to_string())
    }

    /// A send's checks before anything is written: refused while the connection is lost, held
    /// back with `in_flight` messages at the `limit`; the envelope its payload starts with.
    pub fn admit(
        &self,
        in_flight: usize,
        limit: usize,
        payload: &[u8],
    ) -> Result<Envelope, SendError> {
        if let Some(kind) = self.lost_as() {
            return Err(self.unavailable(kind));
        }
        if in_flight >= limit {
            return Err(SendError::Backpressure);
        }
        Envelope::read(payload).map_err(|_| SendError::Failed("bad_envelope".into()))
    }

    /// While the connection is lost: [`Self::recover_then`] without a setup.
    pub fn recover_into(&mut self, conn: &mut C, timeout: Duration) -> bool {
        self.recover_then(conn, timeout, |_| Ok::<(), ()>(()))
    }

    /// While the connection is lost: one attempt when due (else waits up to `timeout`), the
    /// new connection kept if `setup` accepts it; it replaces `conn` and ends the loss. True
    /// when it connected again.
    pub fn recover_then<E>(
        &mut self,
        conn: &mut C,
        timeout: Duration,
        setup: impl FnOnce(&mut C) -> Result<(), E>,
    ) -> bool {
        if self.lost_as.is_none() {
            return false;
        }
        let Some(new) = self.attempt_then(timeout, setup) else {
            return false;
        };
        *conn = new;
        self.lost_as = None;
        true
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
        r.lose("connection_closed");
        assert!(r.redial.since_ns().is_some());
        assert_eq!(r.attempt(Duration::ZERO), Some(7));
        assert_eq!((*r.target(), r.redial.since_ns()), (7, None));
    }

    #[test]
    fn a_connection_its_setup_refuses_is_a_failed_attempt_that_backs_off() {
        let mut r = Reconnector::new(7, policy(true), dial);
        r.lose("connection_closed");
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
        r.lose("connection_closed");
        assert_eq!(r.redial.since_ns(), None);
        assert_eq!(r.attempt(Duration::ZERO), None);
    }

    #[test]
    fn a_loss_refuses_sends_as_its_kind_until_a_recovery_replaces_the_connection() {
        let mut r = Reconnector::new(7, policy(true), dial);
        let sent = crate::Envelope {
            producer: 3,
            sequence: 9,
            intended_ns: 1,
        };
        let mut payload = [0u8; crate::ENVELOPE_HEADER_LEN];
        sent.write(&mut payload);
        assert!(!r.is_lost());
        assert_eq!(r.admit(0, 1, &payload).ok(), Some(sent));
        assert!(matches!(
            r.admit(1, 1, &payload),
            Err(SendError::Backpressure)
        ));
        assert!(
            matches!(r.admit(0, 1, b"short"), Err(SendError::Failed(k)) if k == "bad_envelope")
        );
        let mut conn = 1;
        assert!(
            !r.recover_into(&mut conn, Duration::ZERO),
            "nothing to recover"
        );
        r.lose("broker_gone");
        assert_eq!(r.lost_as(), Some("broker_gone"));
        assert!(
            matches!(r.admit(0, 1, &payload), Err(SendError::Unavailable(k)) if k == "broker_gone")
        );
        assert!(r.recover_into(&mut conn, Duration::ZERO));
        assert_eq!((conn, r.is_lost(), r.redial.since_ns()), (7, false, None));
    }

    #[test]
    fn off_a_lost_connection_fails_sends_and_stays_lost() {
        let mut r = Reconnector::new(7, policy(false), dial);
        r.lose("connection_closed");
        let mut conn = 1;
        assert!(
            matches!(r.admit(0, 1, &[]), Err(SendError::Failed(k)) if k == "connection_closed")
        );
        assert!(!r.recover_into(&mut conn, Duration::ZERO));
        assert_eq!((conn, r.lost_as()), (1, Some("connection_closed")));
    }
}
