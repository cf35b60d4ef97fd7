//! Connecting again after a lost connection (the server restarted, or was killed and started
//! again), under the driver file's `reconnect` backoff.

use std::time::Duration;

use brokerbench_driver::Redial;
use brokerbench_model::reconnect::Reconnect;

use crate::config::RedisUrl;
use crate::conn::Conn;

/// How long one attempt to connect again may take.
const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Reconnector {
    url: RedisUrl,
    pub policy: Reconnect,
    pub redial: Redial,
}

impl Reconnector {
    pub fn new(url: &RedisUrl, policy: Reconnect) -> Self {
        Reconnector {
            url: url.clone(),
            policy,
            redial: Redial::default(),
        }
    }

    /// The server's URL.
    pub fn url(&self) -> &RedisUrl {
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
        let url = &self.url;
        self.redial.attempt(&self.policy, timeout, || {
            Conn::connect(url, REDIAL_TIMEOUT).ok()
        })
    }
}
