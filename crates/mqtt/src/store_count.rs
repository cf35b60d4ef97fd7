//! What the broker still stores for the run's one subscription when the drain ends: MQTT has
//! no queue depth per session, so the count rests on mosquitto's
//! `$SYS/broker/store/messages/count` (every message it holds, once however many sessions
//! hold it), less the count before the consumers subscribed. Only a run with one topic and one
//! subscription and no message expiry asks for it: otherwise the store also holds what other
//! subscriptions have not read, or expired messages not purged yet. It may count more than the
//! subscription's own backlog (another client's messages stored meanwhile); the ledger takes at
//! most what is missing. It counts less only if what was stored before the run leaves the store
//! meanwhile (an earlier run's persistent session read again). With the count comes what
//! mosquitto dropped past a client's queue limits (`$SYS/broker/publish/messages/dropped`):
//! up to that many of the messages still missing are dropped by the broker, not lost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brokerbench_driver::Unread;

use crate::conn::{Conn, Session};
use crate::metrics::read_sys_values;
use crate::url::MqttUrl;

/// The `$SYS` topic of the count.
const COUNT: &str = "$SYS/broker/store/messages/count";

/// The `$SYS` topic of the messages mosquitto discarded past a client's queue limits:
/// published (retained) once it is not 0.
const DROPPED: &str = "$SYS/broker/publish/messages/dropped";

/// The limits behind [`DROPPED`], for the summary.
pub(crate) const DROPPED_LIMITS: &str = "mosquitto's queue limits for a client, max_queued_messages and max_queued_bytes, counted in $SYS/broker/publish/messages/dropped";

/// What `unread` reads from the broker.
const EVIDENCE: &str = "mosquitto: the messages in the broker's store ($SYS/broker/store/messages/count) when the drain ended, less those stored before the consumers subscribed";

/// How long to wait for the broker's next update of the count: mosquitto publishes `$SYS`
/// every `sys_interval` (the managed broker's 1 s gives an update every 2 s, measured); past
/// that, the value it kept from its last update (retained) is taken.
const FRESH_WITHIN: Duration = Duration::from_millis(2500);

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where to read the counts, and the counts before the consumers subscribed.
#[derive(Clone)]
pub(crate) struct StoreCount {
    url: MqttUrl,
    session: Session,
    at_start: Counts,
    /// Messages the broker dropped since the start, once `unread` read the counts at the end.
    dropped: Arc<Mutex<Option<u64>>>,
}

/// What the broker said in one update.
#[derive(Debug, Clone, Copy)]
struct Counts {
    stored: u64,
    dropped: u64,
}

impl StoreCount {
    /// The counts now (the broker's next update of them: the one it kept may be up to an
    /// update old, and hold what a previous run's consumer left), read as client `session`;
    /// None when the broker publishes none.
    pub(crate) fn start(url: &MqttUrl, session: Session) -> Option<StoreCount> {
        let at_start = read(url, &session)?;
        Some(StoreCount {
            url: url.clone(),
            session,
            at_start,
            dropped: Arc::default(),
        })
    }

    /// The subscription's backlog in the store now, as the one place the consumer reads; and,
    /// for [`StoreCount::dropped`], what the broker dropped since the start.
    pub(crate) fn unread(&self) -> Option<Vec<Unread>> {
        let now = read(&self.url, &self.session)?;
        let dropped = now.dropped.saturating_sub(self.at_start.dropped);
        *self.dropped.lock().unwrap_or_else(|e| e.into_inner()) = Some(dropped);
        Some(vec![Unread {
            slot: 0,
            place: "the broker's store".into(),
            messages: now.stored.saturating_sub(self.at_start.stored),
            evidence: EVIDENCE,
        }])
    }

    /// Messages the broker dropped past its queue limits over the run, once `unread` has
    /// read the counts at the end (it does when the consumers had not caught up).
    pub(crate) fn dropped(&self) -> Option<u64> {
        *self.dropped.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The broker's counts: the store's from its next update, or, past FRESH_WITHIN, the last one
/// it kept; the dropped messages as last published (0 if never).
fn read(url: &MqttUrl, session: &Session) -> Option<Counts> {
    let mut conn = Conn::connect(url, session, CONNECT_TIMEOUT).ok()?;
    let topics = [COUNT.to_string(), DROPPED.to_string()];
    let granted = conn.subscribe(&topics, 0, CONNECT_TIMEOUT).ok()?;
    if granted.len() != topics.len() || granted.iter().any(|&g| g >= 0x80) {
        return None;
    }
    let give_up = Instant::now() + FRESH_WITHIN;
    let (mut values, mut updated) = (BTreeMap::new(), false);
    while !updated {
        let left = give_up.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        updated = read_sys_values(&mut conn, &mut values, COUNT.as_bytes(), left)
            .ok()?
            .1;
    }
    let number = |topic: &str| values.get(topic)?.trim().parse::<u64>().ok();
    Some(Counts {
        stored: number(COUNT)?,
        dropped: number(DROPPED).unwrap_or(0),
    })
}
