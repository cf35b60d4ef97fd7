//! Connecting again after a lost connection (the broker restarted, or was killed and started
//! again), under the driver file's `reconnect` backoff; a consumer subscribes again.

use std::time::Duration;

use brokerbench_driver::Redial;
use brokerbench_model::reconnect::Reconnect;

use crate::conn::{Conn, Session};
use crate::url::MqttUrl;

/// How long one attempt to connect again (and subscribe) may take.
const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// What a consumer subscribes to: its filters, at a QoS.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub filters: Vec<String>,
    pub qos: u8,
}

pub struct Reconnector {
    url: MqttUrl,
    session: Session,
    subscription: Option<Subscription>,
    pub policy: Reconnect,
    pub redial: Redial,
}

impl Reconnector {
    pub fn new(
        url: &MqttUrl,
        session: &Session,
        subscription: Option<Subscription>,
        policy: Reconnect,
    ) -> Self {
        Reconnector {
            url: url.clone(),
            session: session.clone(),
            subscription,
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

    /// One attempt when due (else waits up to `timeout` for it): a new connection (with the
    /// subscription made again), or None. Off, it only waits.
    pub fn attempt(&mut self, timeout: Duration) -> Option<Conn> {
        let (url, session, subscription) = (&self.url, &self.session, &self.subscription);
        self.redial.attempt(&self.policy, timeout, || {
            let mut conn = Conn::connect(url, session, REDIAL_TIMEOUT).ok()?;
            if let Some(s) = subscription {
                let granted = conn.subscribe(&s.filters, s.qos, REDIAL_TIMEOUT).ok()?;
                if granted.iter().any(|&g| g >= 0x80) {
                    return None;
                }
            }
            Some(conn)
        })
    }
}
