//! Connecting again after a lost connection (the broker restarted, or was killed and started
//! again), under the driver file's `reconnect` backoff, with the same client id: a
//! subscription member finds its durable queue as the broker's journal kept it.

use std::time::Duration;

use brokerbench_driver::Redial;
use brokerbench_model::reconnect::Reconnect;

use crate::config::ArtemisUrl;
use crate::conn::Conn;

/// How long one attempt to connect again may take.
const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Reconnector {
    url: ArtemisUrl,
    client_id: Option<String>,
    pub policy: Reconnect,
    pub redial: Redial,
}

impl Reconnector {
    pub fn new(url: &ArtemisUrl, client_id: Option<&str>, policy: Reconnect) -> Self {
        Reconnector {
            url: url.clone(),
            client_id: client_id.map(str::to_string),
            policy,
            redial: Redial::default(),
        }
    }

    /// The broker's URL.
    pub fn url(&self) -> &ArtemisUrl {
        &self.url
    }

    /// The connection is gone: from now on the producer or consumer counts as disconnected.
    pub fn lost(&mut self) {
        if self.policy.enabled {
            self.redial.lost();
        }
    }

    /// One attempt when due (else waits up to `timeout` for it): a new connection, or None.
    /// Off, it only waits.
    pub fn attempt(&mut self, timeout: Duration) -> Option<Conn> {
        let (url, client_id) = (&self.url, self.client_id.as_deref());
        self.redial.attempt(&self.policy, timeout, || {
            Conn::connect(url, REDIAL_TIMEOUT, client_id).ok()
        })
    }
}
