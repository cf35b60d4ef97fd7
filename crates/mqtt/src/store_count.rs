//! What the broker still stores for the run's one subscription when the drain ends: MQTT has
//! no queue depth per session, so the count rests on mosquitto's
//! `$SYS/broker/store/messages/count` (every message it holds, once however many sessions
//! hold it), less the count before the consumers subscribed. Only a run with one topic and one
//! subscription and no message expiry asks for it: otherwise the store also holds what other
//! subscriptions have not read, or expired messages not purged yet. It may count more than the
//! subscription's own backlog (another client's messages stored meanwhile); the ledger takes at
//! most what is missing. It counts less only if what was stored before the run leaves the store
//! meanwhile (an earlier run's persistent session read again).

use std::time::{Duration, Instant};

use brokerbench_driver::Unread;

use crate::conn::{Conn, Session};
use crate::packet;
use crate::url::MqttUrl;

/// The `$SYS` topic of the count.
const COUNT: &str = "$SYS/broker/store/messages/count";

/// What `unread` reads from the broker.
const EVIDENCE: &str = "mosquitto: the messages in the broker's store ($SYS/broker/store/messages/count) when the drain ended, less those stored before the consumers subscribed";

/// How long to wait for the broker's next update of the count: mosquitto publishes `$SYS`
/// every `sys_interval` (the managed broker's 1 s gives an update every 2 s, measured); past
/// that, the value it kept from its last update (retained) is taken.
const FRESH_WITHIN: Duration = Duration::from_millis(2500);

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where to read the count, and the count before the consumers subscribed.
#[derive(Clone)]
pub(crate) struct StoreCount {
    url: MqttUrl,
    session: Session,
    at_start: u64,
}

impl StoreCount {
    /// The count now (the broker's next update of it: the one it kept may be up to an
    /// update old, and hold what a previous run's consumer left), read as client `session`;
    /// None when the broker publishes none.
    pub(crate) fn start(url: &MqttUrl, session: Session) -> Option<StoreCount> {
        let at_start = read(url, &session)?;
        Some(StoreCount {
            url: url.clone(),
            session,
            at_start,
        })
    }

    /// The subscription's backlog in the store now, as the one place the consumer reads.
    pub(crate) fn unread(&self) -> Option<Vec<Unread>> {
        let now = read(&self.url, &self.session)?;
        Some(vec![Unread {
            slot: 0,
            place: "the broker's store".into(),
            messages: now.saturating_sub(self.at_start),
            evidence: EVIDENCE,
        }])
    }
}

/// The broker's count: its next update, or, past FRESH_WITHIN, the last one it kept.
fn read(url: &MqttUrl, session: &Session) -> Option<u64> {
    let mut conn = Conn::connect(url, session, CONNECT_TIMEOUT).ok()?;
    let granted = conn
        .subscribe(&[COUNT.to_string()], 0, CONNECT_TIMEOUT)
        .ok()?;
    if granted.first().is_none_or(|&g| g >= 0x80) {
        return None;
    }
    let give_up = Instant::now() + FRESH_WITHIN;
    let (mut kept, mut updated) = (None, None);
    while updated.is_none() {
        let left = give_up.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        conn.poll(left, &mut |p, _| {
            if p.kind == packet::PUBLISH {
                let m = packet::parse_publish(session.version, p.flags, p.body).map_err(|e| e.0)?;
                let count = std::str::from_utf8(m.payload)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
                if m.topic == COUNT.as_bytes() {
                    // A retained value is the last update's, sent at once to a new subscription.
                    if p.flags & 0x01 == 0 {
                        updated = count;
                    } else {
                        kept = count;
                    }
                }
            }
            Ok(())
        })
        .ok()?;
    }
    updated.or(kept)
}
