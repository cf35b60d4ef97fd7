//! Connecting again after a lost connection (the broker restarted, or was killed and started
//! again), under the driver file's `reconnect` backoff; the producer or consumer then sets
//! itself up again on the new connection (its producers, its subscriptions).

use std::time::Duration;

use brokerbench_driver::Redial;
use brokerbench_model::reconnect::Reconnect;

use crate::config::PulsarUrl;
use crate::conn::Conn;

/// How long connecting again, and each request of setting up again (a lookup, a producer's or
/// a subscription's creation), may take in one attempt.
pub const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Reconnector {
    url: PulsarUrl,
    pub policy: Reconnect,
    pub redial: Redial,
}

impl Reconnector {
    pub fn new(url: &PulsarUrl, policy: Reconnect) -> Self {
        Reconnector {
            url: url.clone(),
            policy,
            redial: Redial::default(),
        }
    }

    /// The connection is gone: from now on the producer or consumer counts as disconnected.
    pub fn lost(&mut self) {
        if self.policy.enabled {
            self.redial.lost();
        }
    }

    /// One attempt when due (else waits up to `timeout` for it): a new connection that
    /// `setup` accepted, or None. Off, it only waits.
    pub fn attempt(
        &mut self,
        timeout: Duration,
        setup: impl FnOnce(&mut Conn) -> Result<(), String>,
    ) -> Option<Conn> {
        let url = &self.url;
        self.redial.attempt(&self.policy, timeout, || {
            let mut conn = Conn::connect(url, REDIAL_TIMEOUT).ok()?;
            setup(&mut conn).ok().map(|()| conn)
        })
    }
}
