//! Reading the socket and routing its frames by channel: deliveries put together from their
//! frames, confirms and returns timestamped, replies and closes handed to their channel.

use super::*;

/// Largest message body accepted: RabbitMQ's own ceiling (`max_message_size` at most 512 MiB).
const MAX_BODY: u64 = 512 << 20;
/// A consumer reading for a shared connection stops reading while another channel's inbox
/// holds this many body bytes its consumer has not taken: with automatic acknowledgements
/// the broker sends without limit, and a slow consumer's inbox would grow with it. The socket
/// then fills and TCP holds the broker back, as a client's bounded queue does.
pub(super) const INBOX_LIMIT: usize = 16 << 20;

impl Shared {
    /// Reads until `until` holds for `channel` or `timeout` passes; whether it holds.
    pub(super) fn read_until(
        &self,
        channel: &ChannelState,
        timeout: Duration,
        until: &dyn Fn(&Inbox) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut first = true;
        loop {
            if until(&channel.inbox()) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if (left.is_zero() && !first) || self.lost.load(Ordering::Relaxed) {
                return false;
            }
            first = false;
            self.heartbeat();
            let Some(mut side) = self.wait_for_turn(channel, left, until) else {
                continue;
            };
            if until(&channel.inbox()) {
                drop(side);
                self.pass_turn();
                return true;
            }
            if self.another_inbox_is_full(channel) {
                // Read no more until that consumer takes its deliveries.
                drop(side);
                self.pass_turn();
                channel.wait_signalled(left.min(Duration::from_millis(5)), until);
                continue;
            }
            let alive = self.read_once(&mut side, Some(left));
            drop(side);
            self.pass_turn();
            if !alive {
                return until(&channel.inbox());
            }
        }
    }

    /// The read side if no other thread is reading this connection; else waits (up to `left`)
    /// until that one routes something to `channel` or stops reading, and returns None.
    pub(super) fn wait_for_turn(
        &self,
        channel: &ChannelState,
        left: Duration,
        until: &dyn Fn(&Inbox) -> bool,
    ) -> Option<MutexGuard<'_, ReadSide>> {
        let mut inbox = channel.inbox();
        // The reader passes the turn only after it let go of the read side, and takes this
        // inbox's lock to see `waiting`. Registered here under that lock before each try of
        // the read side, this waiter cannot miss it: a reader that let go before the try left
        // the read side free, and one that lets go after it sees the waiter and must take this
        // inbox's lock to wake it, which it only gets once this waiter waits.
        channel.waiting.fetch_add(1, Ordering::SeqCst);
        self.turn_waiters.fetch_add(1, Ordering::SeqCst);
        let side = loop {
            match self.read.try_lock() {
                Ok(side) => break Some(side),
                Err(std::sync::TryLockError::Poisoned(e)) => break Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            if until(&inbox) {
                break None;
            }
            let (guard, timed_out) = channel
                .ready
                .wait_timeout(inbox, left)
                .unwrap_or_else(|e| e.into_inner());
            inbox = guard;
            if timed_out.timed_out() || until(&inbox) {
                break None;
            }
        };
        channel.waiting.fetch_sub(1, Ordering::SeqCst);
        self.turn_waiters.fetch_sub(1, Ordering::SeqCst);
        side
    }

    /// Whether a channel other than `mine` holds INBOX_LIMIT bytes of deliveries or more.
    fn another_inbox_is_full(&self, mine: &ChannelState) -> bool {
        let channels = lock(&self.channels);
        channels.iter().flatten().any(|channel| {
            !std::ptr::eq(&**channel, mine) && channel.inbox().deliveries.bytes() >= INBOX_LIMIT
        })
    }

    /// After a consumer stopped reading: wakes the consumers waiting for their turn.
    pub(super) fn pass_turn(&self) {
        if self.turn_waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let channels: Vec<_> = lock(&self.channels).iter().flatten().cloned().collect();
        for channel in channels {
            let inbox = channel.inbox();
            if channel.waiting.load(Ordering::Relaxed) > 0 {
                drop(inbox);
                channel.ready.notify_all();
            }
        }
    }

    /// Reads once (waiting up to `timeout`, None = as long as it takes) and routes every
    /// complete frame; false once the connection is gone.
    pub(super) fn read_once(&self, side: &mut ReadSide, timeout: Option<Duration>) -> bool {
        if side.start == side.end {
            side.start = 0;
            side.end = 0;
        } else if side.buffer.len() - side.end < self.frame_max as usize + wire::FRAME_OVERHEAD {
            side.buffer.copy_within(side.start..side.end, 0);
            side.end -= side.start;
            side.start = 0;
        }
        let fd = side.stream.as_raw_fd();
        let room = side.buffer.len() - side.end;
        let read = recv_within(fd, &mut side.buffer[side.end..], timeout, side.drained);
        let at_ns = match read {
            Ok(None) => {
                self.judge_silence();
                return true;
            }
            Ok(Some(Received { bytes: 0, .. })) => {
                self.lose("the broker closed the connection".into());
                return false;
            }
            Ok(Some(Received { bytes, at_ns })) => {
                side.end += bytes;
                side.drained = bytes < room;
                let now = self.clock.now_ns();
                self.last_read_ns.store(now, Ordering::Relaxed);
                at_ns.map_or(now, |at| at.min(now))
            }
            Err(e) => {
                if !self.lost.load(Ordering::Relaxed) {
                    self.lose(format!("reading from the socket: {e}"));
                }
                return false;
            }
        };
        let alive = self.route_frames(side, at_ns);
        if !side.replies.is_empty() {
            let _ = self.write(&mut side.replies);
        }
        for channel in side.touched.drain(..) {
            channel.ready.notify_all();
        }
        alive
    }

    /// Routes every complete frame in the read side's buffer, each as read at `at_ns`; false
    /// once the connection ended (a malformed frame, or one that ends it).
    fn route_frames(&self, side: &mut ReadSide, at_ns: u64) -> bool {
        loop {
            let frame =
                match next_frame(&side.buffer[side.start..side.end], self.frame_max as usize) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => return true,
                    Err(wire::Malformed(why)) => {
                        self.lose(why.into());
                        return false;
                    }
                };
            let (from, to) = (side.start + frame.payload.0, side.start + frame.payload.1);
            side.start += frame.len;
            let ReadSide {
                buffer,
                content,
                touched,
                replies,
                ..
            } = side;
            if !self.route(
                frame.kind,
                frame.channel,
                &buffer[from..to],
                at_ns,
                content,
                touched,
                replies,
            ) {
                return false;
            }
        }
    }

    /// Routes one frame to its channel; false when the connection ended.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn route(
        &self,
        kind: u8,
        number: u16,
        payload: &[u8],
        at_ns: u64,
        content: &mut Vec<Option<Content>>,
        touched: &mut Vec<Arc<ChannelState>>,
        replies: &mut Vec<u8>,
    ) -> bool {
        let Some(channel) = self.channel(number) else {
            // A channel already closed on our side: late frames are dropped.
            return true;
        };
        let slot = number as usize;
        if content.len() <= slot {
            content.resize_with(slot + 1, || None);
        }
        match kind {
            FRAME_METHOD => {
                let slot = &mut content[slot];
                match self.route_method(&channel, number, payload, at_ns, slot, replies) {
                    MethodRouted::ReadOn => true,
                    MethodRouted::Signal => {
                        if !touched.iter().any(|t| Arc::ptr_eq(t, &channel)) {
                            touched.push(channel);
                        }
                        true
                    }
                    MethodRouted::Stop => false,
                }
            }
            FRAME_HEADER => self.route_header(&channel, payload, &mut content[slot], touched),
            FRAME_BODY => self.route_body(&channel, payload, &mut content[slot], touched),
            _ => true,
        }
    }

    /// Routes a method frame on `channel` (number `number`): confirms, a cancelled consumer,
    /// the channel's close and replies into its inbox, the start of a delivery or of a
    /// returned message into `slot`; the connection's own methods go on to
    /// `route_connection_method`.
    fn route_method(
        &self,
        channel: &ChannelState,
        number: u16,
        payload: &[u8],
        at_ns: u64,
        slot: &mut Option<Content>,
        replies: &mut Vec<u8>,
    ) -> MethodRouted {
        let mut r = Reader::new(payload);
        let Some(method) = r.method_id() else {
            return MethodRouted::ReadOn;
        };
        let mut inbox = channel.inbox();
        let notify = match method {
            id::BASIC_ACK | id::BASIC_NACK => {
                let Some(event) = confirm(method, &mut r, at_ns) else {
                    drop(inbox);
                    self.malformed("a confirm without its delivery tag");
                    return MethodRouted::Stop;
                };
                inbox.events.push(event);
                true
            }
            id::BASIC_DELIVER => {
                let tag = r.skip_short_string().and_then(|_| r.u64());
                let Some(tag) = tag else {
                    drop(inbox);
                    self.malformed("a delivery without its delivery tag");
                    return MethodRouted::Stop;
                };
                *slot = announced(Some(tag));
                false
            }
            id::BASIC_RETURN => {
                *slot = announced(None);
                false
            }
            id::BASIC_CANCEL => {
                inbox.cancelled = true;
                true
            }
            id::CHANNEL_CLOSE => {
                let reason = r.close_reason();
                if inbox.ended.is_none() {
                    inbox.ended = Some((CHANNEL_CLOSED, reason));
                }
                channel.ended.store(true, Ordering::Relaxed);
                wire::method(replies, number, id::CHANNEL_CLOSE_OK, |_| {});
                true
            }
            _ => return self.route_connection_method(method, r, inbox, channel, at_ns, replies),
        };
        MethodRouted::signal_if(notify, channel)
    }

    /// Routes the connection's methods (close, close-ok, blocked, unblocked) and replies to
    /// synchronous methods, with `inbox`, the frame's channel's, locked by `route_method`.
    fn route_connection_method(
        &self,
        method: (u16, u16),
        mut r: Reader<'_>,
        mut inbox: MutexGuard<'_, Inbox>,
        channel: &ChannelState,
        at_ns: u64,
        replies: &mut Vec<u8>,
    ) -> MethodRouted {
        match method {
            id::CONNECTION_CLOSE => {
                let reason = r.close_reason();
                drop(inbox);
                wire::method(replies, 0, id::CONNECTION_CLOSE_OK, |_| {});
                let _ = self.write(replies);
                self.lose(format!("the broker closed the connection: {reason}"));
                MethodRouted::Stop
            }
            id::CONNECTION_BLOCKED => {
                let reason = r.short_string().unwrap_or_default();
                lock(&self.blocked).get_or_insert((at_ns, reason));
                MethodRouted::ReadOn
            }
            id::CONNECTION_UNBLOCKED => {
                lock(&self.blocked).take();
                MethodRouted::ReadOn
            }
            id::CONNECTION_CLOSE_OK => {
                inbox.reply = Some((method, Vec::new()));
                drop(inbox);
                self.lost.store(true, Ordering::Relaxed);
                channel.ready.notify_all();
                MethodRouted::Stop
            }
            other => {
                // Replies to synchronous methods (open-ok, select-ok, qos-ok,
                // consume-ok, close-ok); anything else is not expected and ignored.
                inbox.reply = Some((other, r.rest().to_vec()));
                MethodRouted::signal_if(true, channel)
            }
        }
    }

    /// Routes a content header: the body size of the content begun on the frame's channel,
    /// complete at once when 0; false when the header is malformed.
    fn route_header(
        &self,
        channel: &Arc<ChannelState>,
        payload: &[u8],
        slot: &mut Option<Content>,
        touched: &mut Vec<Arc<ChannelState>>,
    ) -> bool {
        if let Some(c) = slot.as_mut() {
            let mut r = Reader::new(payload);
            let Some(size) = r.take(4).and_then(|_| r.u64()) else {
                return self.malformed("a content header without its body size");
            };
            if size > MAX_BODY {
                return self.malformed(&format!(
                    "a content header announcing {size} bytes (more than {MAX_BODY})"
                ));
            }
            c.size = Some(size);
            if size == 0 {
                self.complete(channel, slot.take(), &[], touched);
            }
        }
        true
    }

    /// Routes a body frame: adds it to the content being put together on the frame's
    /// channel, handed over once whole; false when it does not fit the content header.
    fn route_body(
        &self,
        channel: &Arc<ChannelState>,
        payload: &[u8],
        slot: &mut Option<Content>,
        touched: &mut Vec<Arc<ChannelState>>,
    ) -> bool {
        let Some(c) = slot.as_mut() else {
            return true;
        };
        let Some(size) = c.size.map(|s| s as usize) else {
            return self.malformed("a body frame before its content header");
        };
        if c.body.len() + payload.len() > size {
            return self.malformed(&format!(
                "{} body bytes for content of {size}",
                c.body.len() + payload.len()
            ));
        }
        if c.body.is_empty() && payload.len() == size {
            // The usual case: the whole body in one frame, copied once.
            let c = slot.take();
            self.complete(channel, c, payload, touched);
        } else {
            c.body.extend_from_slice(payload);
            if c.body.len() >= size {
                let mut c = slot.take();
                let body = c.as_mut().map(|c| std::mem::take(&mut c.body));
                self.complete(channel, c, body.as_deref().unwrap_or(&[]), touched);
            }
        }
        true
    }

    /// Gives up a connection whose broker broke the protocol (AMQP's answer is to close it):
    /// every channel ends with the reason. Returns false, for the caller to stop reading.
    fn malformed(&self, what: &str) -> bool {
        self.lose(format!("the broker broke the protocol: {what}"));
        false
    }

    /// Hands a complete delivery or returned message to its channel.
    pub(super) fn complete(
        &self,
        channel: &Arc<ChannelState>,
        content: Option<Content>,
        body: &[u8],
        touched: &mut Vec<Arc<ChannelState>>,
    ) {
        let Some(content) = content else {
            return;
        };
        let mut inbox = channel.inbox();
        match content.tag {
            Some(tag) => inbox.deliveries.push(tag, body),
            None => {
                if let Ok(envelope) = Envelope::read(body) {
                    inbox.events.push(ChannelEvent::Returned(envelope));
                }
            }
        }
        if channel.waiting.load(Ordering::Relaxed) > 0 {
            drop(inbox);
            if !touched.iter().any(|t| Arc::ptr_eq(t, channel)) {
                touched.push(channel.clone());
            }
        }
    }
}

/// What the reader does after a method frame.
enum MethodRouted {
    /// Reads on.
    ReadOn,
    /// Reads on, and signals the frame's channel once the read is routed: its owner waits.
    Signal,
    /// Stops reading: the connection ended.
    Stop,
}

impl MethodRouted {
    /// Signal when the frame left something its channel's owner waits for (`notify`) and
    /// the owner waits, else ReadOn. Called with the channel's inbox locked, so that an owner
    /// starting to wait is not missed.
    fn signal_if(notify: bool, channel: &ChannelState) -> MethodRouted {
        if notify && channel.waiting.load(Ordering::Relaxed) > 0 {
            MethodRouted::Signal
        } else {
            MethodRouted::ReadOn
        }
    }
}

/// Reads what the socket `fd` has into `into`, waiting up to `timeout` (None: as long as it
/// takes) when nothing is there yet: Some(what was read; 0 bytes at the end of the stream),
/// or None when nothing came in time. After a read that `drained` the socket, a wait begins
/// with poll(2) rather than with a read that would most likely find nothing.
fn recv_within(
    fd: i32,
    into: &mut [u8],
    timeout: Option<Duration>,
    drained: bool,
) -> std::io::Result<Option<Received>> {
    let clock = Clock::process();
    let waits = !timeout.is_some_and(|t| t.is_zero());
    if !(drained && waits) {
        if let Some(read) = recv_now(fd, into, clock)? {
            return Ok(Some(read));
        }
    }
    if !waits || !wait_fd(fd, libc::POLLIN, timeout) {
        return Ok(None);
    }
    recv_now(fd, into, clock)
}

/// The confirm event of a basic.ack or basic.nack (`method`) read at `at_ns`, from its
/// arguments in `r`; None without its delivery tag.
fn confirm(method: (u16, u16), r: &mut Reader<'_>, at_ns: u64) -> Option<ChannelEvent> {
    let (Some(tag), Some(bits)) = (r.u64(), r.u8()) else {
        return None;
    };
    let multiple = bits & 1 == 1;
    Some(ChannelEvent::Confirm {
        tag,
        multiple,
        ack: method == id::BASIC_ACK,
        at_ns,
    })
}

/// The content a basic.deliver (its delivery tag) or basic.return (None) begins, its header
/// and body still to come.
fn announced(tag: Option<u64>) -> Option<Content> {
    Some(Content {
        tag,
        size: None,
        body: Vec::new(),
    })
}
