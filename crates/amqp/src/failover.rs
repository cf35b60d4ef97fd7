//! The nodes a driver's connections go to: `uri` first, then `failover_uris` in turn. A
//! connection that cannot be opened (its node is down) moves every later one to the next node,
//! so that producers and consumers reconnecting after a node is lost reach one that runs.

use std::sync::atomic::{AtomicUsize, Ordering};

use brokerbench_driver::DriverError;

use crate::config::AmqpUri;

pub(crate) struct Failover {
    uris: Vec<AmqpUri>,
    /// The node in use: an index into `uris`, modulo its length.
    at: AtomicUsize,
}

impl Failover {
    pub(crate) fn new(uri: &AmqpUri, others: &[AmqpUri]) -> Self {
        Failover {
            uris: std::iter::once(uri).chain(others).cloned().collect(),
            at: AtomicUsize::new(0),
        }
    }

    /// `open` on the node in use; when it fails, the next node is the one in use from then on.
    pub(crate) fn open<T>(
        &self,
        open: impl FnOnce(&AmqpUri) -> Result<T, DriverError>,
    ) -> Result<T, DriverError> {
        let at = self.at.load(Ordering::Relaxed);
        let result = open(&self.uris[at % self.uris.len()]);
        if result.is_err() {
            // Only the first to fail on this node moves on: a burst of failures moves once.
            let _ = self
                .at
                .compare_exchange(at, at + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(port: u16) -> AmqpUri {
        AmqpUri::parse(&format!("amqp://u:p@127.0.0.1:{port}/%2f")).unwrap()
    }

    #[test]
    fn a_failed_open_moves_later_ones_to_the_next_node_in_turn() {
        let failover = Failover::new(&uri(1), &[uri(2), uri(3)]);
        let port = |u: &AmqpUri| u.address();
        assert_eq!(failover.open(|u| Ok(port(u))).unwrap(), "127.0.0.1:1");
        let down = |_: &AmqpUri| Err::<String, _>(DriverError::Other("refused".into()));
        assert!(failover.open(down).is_err());
        assert_eq!(failover.open(|u| Ok(port(u))).unwrap(), "127.0.0.1:2");
        assert!(failover.open(down).is_err());
        assert!(failover.open(down).is_err());
        assert_eq!(
            failover.open(|u| Ok(port(u))).unwrap(),
            "127.0.0.1:1",
            "round again"
        );
        let alone = Failover::new(&uri(1), &[]);
        assert!(alone.open(down).is_err());
        assert_eq!(alone.open(|u| Ok(port(u))).unwrap(), "127.0.0.1:1");
    }
}
