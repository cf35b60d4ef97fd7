//! Connecting again after a lost connection, under the driver file's `reconnect` backoff, to
//! the servers of the cluster in turn: the driver file's, then every server a server announced
//! in its INFO (`connect_urls`), as NATS's own clients do — so that losing one server of a
//! cluster costs a client the time to reach another, not the time that server takes to return.
//! The backoff and the loss are the shared [`brokerbench_driver::Reconnector`]'s; the pool of
//! servers is its target.

use std::cell::Cell;

use brokerbench_model::reconnect::Reconnect;

use crate::config::NatsUrl;
use crate::conn::Conn;

/// A producer's or consumer's way back to the cluster, one server of the pool an attempt.
pub type Reconnector = brokerbench_driver::Reconnector<Conn, Pool>;

/// The way back for a connection to `url` whose server sent `info`.
pub fn reconnector(url: &NatsUrl, policy: Reconnect, info: &serde_json::Value) -> Reconnector {
    Reconnector::new(Pool::new(url, info), policy, Pool::redial)
}

/// While the connection is lost: one attempt (when due) on the pool's next server, whose new
/// connection replaces `conn` and listens on `subject`; the pool then learns the servers it
/// announces. True when it connected again.
pub fn recover(
    reconnector: &mut Reconnector,
    conn: &mut Conn,
    timeout: std::time::Duration,
    subject: &str,
) -> bool {
    let listen = |conn: &mut Conn| {
        conn.subscribe(subject, 1);
        Ok::<(), ()>(())
    };
    let back = reconnector.recover_then(conn, timeout, listen);
    if back {
        reconnector.target_mut().learn(&conn.info);
    }
    back
}

/// The servers a client may connect to again.
pub struct Pool {
    /// The driver file's server: credentials and TLS for every server of the pool.
    url: NatsUrl,
    /// Servers to try, as (host, port): the driver file's first.
    servers: Vec<(String, u16)>,
    /// The entry the next attempt tries (the one after the server just lost).
    next: Cell<usize>,
}

impl Pool {
    fn new(url: &NatsUrl, info: &serde_json::Value) -> Self {
        let mut pool = Pool {
            url: url.clone(),
            servers: vec![(url.host.clone(), url.port)],
            next: Cell::new(1),
        };
        pool.learn(info);
        pool
    }

    /// Adds the servers an INFO announces that the pool lacks (the same address under another
    /// name, `localhost` and `127.0.0.1`, is the same server).
    fn learn(&mut self, info: &serde_json::Value) {
        for server in announced(info) {
            let known = self.servers.iter().any(|p| same_server(p, &server));
            if !known {
                self.servers.push(server);
            }
        }
    }

    /// The driver file's server, with the pool's entry `index` as its address. Over TLS the
    /// certificate is checked against the driver file's host unless `server_name` says
    /// otherwise: an announced address is where that server listens, not its name.
    fn server(&self, index: usize) -> NatsUrl {
        let mut server = self.url.clone();
        (server.host, server.port) = self.servers[index].clone();
        if let Some(tls) = server.tls.as_mut() {
            tls.server_name.get_or_insert_with(|| self.url.host.clone());
        }
        server
    }

    /// One attempt (of the [`Reconnector`]) on the pool's next server: a new connection, or
    /// None.
    fn redial(&self) -> Option<Conn> {
        let index = self.next.get() % self.servers.len();
        self.next.set(index + 1);
        Conn::connect(&self.server(index), brokerbench_driver::REDIAL_TIMEOUT).ok()
    }
}

/// Whether two (host, port) pairs are one server: equal, or resolving to a common address.
fn same_server(a: &(String, u16), b: &(String, u16)) -> bool {
    use std::net::ToSocketAddrs;
    let resolved = |(host, port): &(String, u16)| -> Vec<std::net::SocketAddr> {
        (host.as_str(), *port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .unwrap_or_default()
    };
    a == b || {
        let b = resolved(b);
        resolved(a).iter().any(|x| b.contains(x))
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
        let r = Pool::new(&url, &info);
        assert_eq!(
            r.servers,
            [
                ("127.0.0.1".to_string(), 4322),
                ("127.0.0.1".to_string(), 4400),
                ("::1".to_string(), 4401)
            ]
        );
        assert_eq!(
            r.next.get(),
            1,
            "the first attempt tries another server than the lost one"
        );
        let alone = Pool::new(&url, &json!({}));
        assert_eq!(alone.servers.len(), 1);
    }

    #[test]
    fn a_name_and_its_address_are_one_server_and_tls_keeps_the_name() {
        let mut url = NatsUrl::parse("nats://localhost:4322").unwrap();
        url.tls = Some(Default::default());
        let info = json!({"connect_urls": ["127.0.0.1:4322", "127.0.0.1:4400"]});
        let r = Pool::new(&url, &info);
        assert_eq!(r.servers.len(), 2, "{:?}", r.servers);
        let other = r.server(1);
        assert_eq!((other.host.as_str(), other.port), ("127.0.0.1", 4400));
        let name = other.tls.and_then(|t| t.server_name);
        assert_eq!(name.as_deref(), Some("localhost"));
    }
}
