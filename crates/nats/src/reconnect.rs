//! Connecting again after a lost connection, under the driver file's `reconnect` backoff, to
//! the servers of the cluster in turn: the driver file's, then every server a server announced
//! in its INFO (`connect_urls`), as NATS's own clients do — so that losing one server of a
//! cluster costs a client the time to reach another, not the time that server takes to return.

use std::time::Duration;

use crate::config::NatsUrl;
use crate::conn::Conn;

/// How long one attempt to connect again may take.
const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Reconnector {
    /// The driver file's server: credentials and TLS for every server of the pool.
    url: NatsUrl,
    /// Servers to try, as (host, port): the driver file's first.
    pool: Vec<(String, u16)>,
    /// The pool's entry the next attempt tries (the one after the server just lost).
    next: usize,
    pub policy: brokerbench_model::reconnect::Reconnect,
    pub redial: brokerbench_driver::Redial,
}

impl Reconnector {
    /// For a connection to `url` whose server sent `info`.
    pub fn new(
        url: &NatsUrl,
        policy: brokerbench_model::reconnect::Reconnect,
        info: &serde_json::Value,
    ) -> Self {
        let mut reconnector = Reconnector {
            url: url.clone(),
            pool: vec![(url.host.clone(), url.port)],
            next: 1,
            policy,
            redial: Default::default(),
        };
        reconnector.learn(info);
        reconnector
    }

    /// Adds the servers an INFO announces that the pool lacks.
    fn learn(&mut self, info: &serde_json::Value) {
        for server in announced(info) {
            if !self.pool.contains(&server) {
                self.pool.push(server);
            }
        }
    }

    /// One attempt, when due (else waits up to `timeout` for it), to the pool's next server:
    /// a new connection that listens on `subject`, or None.
    pub fn attempt(&mut self, timeout: Duration, subject: &str) -> Option<Conn> {
        if !self.redial.due() {
            std::thread::sleep(timeout.min(self.redial.wait()));
            return None;
        }
        let index = self.next % self.pool.len();
        self.next = index + 1;
        let mut server = self.url.clone();
        (server.host, server.port) = self.pool[index].clone();
        match Conn::connect(&server, REDIAL_TIMEOUT) {
            Ok(mut conn) => {
                conn.subscribe(subject, 1);
                self.learn(&conn.info.clone());
                self.redial.succeeded();
                Some(conn)
            }
            Err(_) => {
                self.redial.failed(&self.policy);
                None
            }
        }
    }
}

/// The client addresses an INFO's `connect_urls` lists (`host:port`, `[v6]:port`).
fn announced(info: &serde_json::Value) -> Vec<(String, u16)> {
    let urls = info["connect_urls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    urls.iter()
        .filter_map(|u| {
            let (host, port) = u.as_str()?.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_pool_is_the_driver_files_server_then_the_announced_ones() {
        let url = NatsUrl::parse("nats://127.0.0.1:4322").unwrap();
        let info =
            json!({"connect_urls": ["127.0.0.1:4322", "127.0.0.1:4400", "[::1]:4401", "bad"]});
        let r = Reconnector::new(&url, Default::default(), &info);
        assert_eq!(
            r.pool,
            [
                ("127.0.0.1".to_string(), 4322),
                ("127.0.0.1".to_string(), 4400),
                ("::1".to_string(), 4401)
            ]
        );
        assert_eq!(
            r.next, 1,
            "the first attempt tries another server than the lost one"
        );
        let alone = Reconnector::new(&url, Default::default(), &json!({}));
        assert_eq!(alone.pool.len(), 1);
    }
}
