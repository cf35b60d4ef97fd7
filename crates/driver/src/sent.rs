//! A message a family's producer has sent and the broker has not yet acknowledged, the
//! acknowledgement it becomes, and what a lost connection makes of the rest.

use brokerbench_model::reconnect::Reconnect;

use crate::{Ack, Envelope, OutgoingMessage, SendError};

/// What an acknowledgement must give back of a message sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub envelope: Envelope,
    pub sent_ns: u64,
    pub bytes: u32,
}

impl Sent {
    /// `message`, whose envelope is `envelope`, as it was sent.
    pub fn of(envelope: Envelope, message: &OutgoingMessage<'_>) -> Sent {
        Sent {
            envelope,
            sent_ns: message.sent_ns,
            bytes: message.payload.len() as u32,
        }
    }

    /// Its acknowledgement: `result`, arrived at `acknowledged_ns` when the driver saw it.
    pub fn settled(self, acknowledged_ns: Option<u64>, result: Result<(), String>) -> Ack {
        Ack {
            envelope: self.envelope,
            sent_ns: self.sent_ns,
            bytes: self.bytes,
            acknowledged_ns,
            result,
        }
    }

    /// Its failure of the kind `kind`, with no answer from the broker.
    pub fn failed(self, kind: &str) -> Ack {
        self.settled(None, Err(kind.to_string()))
    }
}

/// Every message of `sent` fails with the kind `kind` (the connection they went on is gone).
pub fn fail_all(sent: impl IntoIterator<Item = Sent>, kind: &str, acks: &mut dyn FnMut(Ack)) {
    for sent in sent {
        acks(sent.failed(kind));
    }
}

impl SendError {
    /// A send on a lost connection: one to wait out while `policy` reconnects, else a failure.
    pub fn lost(policy: &Reconnect, kind: String) -> SendError {
        if policy.enabled {
            SendError::Unavailable(kind)
        } else {
            SendError::Failed(kind)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sent(sequence: u64) -> Sent {
        let message = OutgoingMessage {
            key: None,
            payload: &[0; 40],
            sent_ns: 7,
        };
        let envelope = Envelope {
            producer: 1,
            sequence,
            intended_ns: 7,
        };
        Sent::of(envelope, &message)
    }

    #[test]
    fn a_message_sent_is_acknowledged_or_failed_with_what_it_was() {
        let ack = sent(3).settled(Some(9), Ok(()));
        assert_eq!(
            (ack.sent_ns, ack.bytes, ack.acknowledged_ns),
            (7, 40, Some(9))
        );
        assert_eq!(ack.envelope, sent(3).envelope);
        let mut failed = Vec::new();
        fail_all([sent(1), sent(2)], "connection_closed", &mut |a| {
            failed.push(a)
        });
        assert_eq!(failed.len(), 2);
        assert!(failed
            .iter()
            .all(|a| a.result == Err("connection_closed".into()) && a.acknowledged_ns.is_none()));
    }

    #[test]
    fn a_send_on_a_lost_connection_waits_only_while_reconnecting() {
        let mut policy = Reconnect {
            enabled: true,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(10),
        };
        let kind = || "connection_closed".to_string();
        assert_eq!(
            SendError::lost(&policy, kind()),
            SendError::Unavailable(kind())
        );
        policy.enabled = false;
        assert_eq!(SendError::lost(&policy, kind()), SendError::Failed(kind()));
    }
}
