//! Channels: what arrives on each (its inbox), and the synchronous request/reply of
//! [`Channel::call`].

use super::*;

/// What arrived on a channel, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEvent {
    /// basic.ack (`ack`) or basic.nack in confirm mode, read at `at_ns` ([`Clock::process`]).
    Confirm {
        tag: u64,
        multiple: bool,
        ack: bool,
        at_ns: u64,
    },
    /// basic.return of a mandatory message no queue took.
    Returned(Envelope),
}

/// Deliveries of one channel, their bodies in one arena.
#[derive(Debug, Default)]
pub struct Deliveries {
    pub(super) bytes: Vec<u8>,
    /// Delivery tag and where the body lies in `bytes`.
    pub(super) items: Vec<(u64, usize, usize)>,
}

impl Deliveries {
    pub(super) fn push(&mut self, tag: u64, body: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(body);
        self.items.push((tag, start, self.bytes.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Body bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Delivery tags and bodies, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.items
            .iter()
            .map(|&(tag, start, end)| (tag, &self.bytes[start..end]))
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
    }
}

/// What the connection's reader left for a channel's owner.
#[derive(Debug, Default)]
pub struct Inbox {
    pub events: Vec<ChannelEvent>,
    pub deliveries: Deliveries,
    /// The reply to the synchronous method last sent: its ids and arguments.
    pub(super) reply: Option<((u16, u16), Vec<u8>)>,
    /// Why the channel cannot be used any more: kind and the broker's reason.
    pub ended: Option<(&'static str, String)>,
    /// The broker cancelled the channel's consumer (its queue was deleted).
    pub cancelled: bool,
}

/// One channel's inbox and the owner waiting on it.
#[derive(Debug, Default)]
pub struct ChannelState {
    pub(super) inbox: Mutex<Inbox>,
    pub(super) ready: Condvar,
    /// Owners waiting on `ready`; changed only under the `inbox` lock, so a reader that pushes
    /// and then reads it (under the same lock) never misses one; signalling is skipped (a
    /// system call saved) when nobody waits.
    pub(super) waiting: AtomicUsize,
    /// Set with `Inbox::ended`, read without the lock on every send.
    pub(super) ended: AtomicBool,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ChannelState {
    pub fn inbox(&self) -> MutexGuard<'_, Inbox> {
        lock(&self.inbox)
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    pub(super) fn end(&self, kind: &'static str, reason: String) {
        let mut inbox = self.inbox();
        if inbox.ended.is_none() {
            inbox.ended = Some((kind, reason));
        }
        self.ended.store(true, Ordering::Relaxed);
        drop(inbox);
        self.ready.notify_all();
    }

    /// Waits up to `timeout`, while another thread reads the connection, until `until` holds.
    pub(super) fn wait_signalled(&self, timeout: Duration, until: &dyn Fn(&Inbox) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut inbox = self.inbox();
        loop {
            if until(&inbox) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.waiting.fetch_add(1, Ordering::Relaxed);
            inbox = self
                .ready
                .wait_timeout(inbox, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One channel of a [`Session`]; closed (channel.close) when dropped.
pub struct Channel {
    pub(super) session: Arc<Session>,
    pub(super) state: Arc<ChannelState>,
    pub(super) number: u16,
    pub(super) open: bool,
}

impl Channel {
    pub fn number(&self) -> u16 {
        self.number
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The channel's connection, to open another channel on it.
    pub fn session_handle(&self) -> Arc<Session> {
        self.session.clone()
    }

    pub fn state(&self) -> &ChannelState {
        &self.state
    }

    /// Why the channel cannot be used any more, if it cannot: kind and reason.
    pub fn ended(&self) -> Option<(&'static str, String)> {
        if !self.state.has_ended() {
            return None;
        }
        self.state.inbox().ended.clone()
    }

    /// Writes frames of this channel (see [`Session::write`]); nothing once the channel has
    /// ended, whose kind [`Channel::ended`] then tells.
    pub fn write(&self, bytes: &mut Vec<u8>) -> Result<(), &'static str> {
        self.session.shared.write_on(Some(&self.state), bytes)
    }

    /// Sends the method frame `frame` and waits up to `timeout` for the reply `expect`; its
    /// arguments, or why not.
    pub fn call(
        &mut self,
        mut frame: Vec<u8>,
        expect: (u16, u16),
        timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + timeout;
        self.state.inbox().reply = None;
        let gone = |channel: &Channel| {
            channel
                .ended()
                .map_or_else(|| "the connection is closed".to_string(), |(_, r)| r)
        };
        self.write(&mut frame).map_err(|_| gone(self))?;
        // Nobody else may write after this: see that the method leaves.
        if !self.session.flush_until(deadline) {
            return Err(if self.session.is_open() {
                format!("the broker took nothing for {timeout:?}")
            } else {
                gone(self)
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let answered = self.session.wait(&self.state, left, &|inbox| {
            inbox.reply.is_some() || inbox.ended.is_some()
        });
        let mut inbox = self.state.inbox();
        match inbox.reply.take() {
            Some((got, arguments)) if got == expect => Ok(arguments),
            Some((got, _)) => Err(format!(
                "the broker answered method {}.{} instead of {}.{}",
                got.0, got.1, expect.0, expect.1
            )),
            None => Err(match &inbox.ended {
                Some((_, reason)) => reason.clone(),
                None if !answered => format!("no answer within {timeout:?}"),
                None => "no answer".into(),
            }),
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // A socket that does not take what was written (a blocked broker) gets no close
        // handshake: the connection's close, or its end, follows.
        if self.open
            && !self.state.has_ended()
            && self.session.is_open()
            && self.session.backlog() == 0
        {
            let mut frame = Vec::new();
            wire::close(
                &mut frame,
                self.number,
                id::CHANNEL_CLOSE,
                "brokerbench done",
            );
            let _ = self.call(frame, id::CHANNEL_CLOSE_OK, CLOSE_TIMEOUT);
        }
        let mut channels = lock(&self.session.shared.channels);
        if let Some(slot) = channels.get_mut(self.number as usize) {
            *slot = None;
        }
    }
}
