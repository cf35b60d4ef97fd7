//! A producer task: sends on its schedule (or as fast as acknowledgements allow), polls
//! acknowledgements, records both.

use std::ops::ControlFlow;

use super::*;

pub(super) struct ProducerTask {
    pub(super) id: u32,
    pub(super) producer: Box<dyn Producer>,
    pub(super) body: BodySource,
    pub(super) keys: Keys,
    /// None in max-rate mode.
    pub(super) schedule: Option<Schedule>,
    pub(super) max_in_flight: usize,
    /// Shortest sleep between sends on the schedule (the workload's `schedule_resolution`).
    pub(super) resolution: Duration,
    pub(super) recorder: ProducerRecorder,
    pub(super) shared: Arc<Shared>,
}

impl ProducerTask {
    pub(super) fn run(mut self) {
        brokerbench_driver::set_precise_sleep();
        let times = *self
            .shared
            .times
            .get()
            .expect("times set before producers start");
        self.send_all(times);
        self.drain();
        self.finish();
    }

    /// Sends until the window ends, Ctrl-C or the data file fails: on the schedule, or at max
    /// rate as fast as acknowledgements make room.
    fn send_all(&mut self, times: Times) {
        let clock = self.shared.clock;
        let mut message = Vec::with_capacity(1024);
        let mut sequence = 0u64;
        let mut since_poll = 0u32;
        'send: loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            let measure_end_ns = self.shared.measure_end();
            self.recorder.follow_end(measure_end_ns);
            let next = match self.schedule.as_mut() {
                Some(schedule) => next_on_schedule(
                    self.producer.as_mut(),
                    &mut self.recorder,
                    schedule,
                    &self.shared,
                    self.resolution,
                    measure_end_ns,
                ),
                None => self.next_at_max_rate(sequence, times.start_ns, measure_end_ns),
            };
            let Some((intended, now)) = next else {
                break;
            };
            match send_message(
                self.id,
                self.producer.as_mut(),
                &mut self.recorder,
                &mut self.body,
                &mut self.keys,
                &mut message,
                &mut sequence,
                (intended, now),
                clock,
                &self.shared,
            ) {
                SendOutcome::Handed | SendOutcome::Failed => {}
                // On a schedule the message was due in the window and is counted with what
                // else was due (the next turn counts that and ends); at max rate there is no
                // schedule to be behind, and the window simply closed while it was under way.
                SendOutcome::WindowOver if self.schedule.is_some() => self.recorder.not_sent(1),
                SendOutcome::WindowOver => {
                    self.recorder.unsent_at_window_end();
                    break 'send;
                }
                SendOutcome::Stopped | SendOutcome::PayloadFailed => break 'send,
            }
            since_poll += 1;
            if since_poll >= 64 {
                since_poll = 0;
                poll_acks(
                    self.producer.as_mut(),
                    &mut self.recorder,
                    clock,
                    Duration::ZERO,
                );
            }
        }
    }

    /// Max rate: waits for the start before the first message (`sequence` 0) and for room
    /// among the messages in flight, and returns (intended, now), both the time of the send;
    /// None when the window is over.
    #[inline]
    fn next_at_max_rate(
        &mut self,
        sequence: u64,
        start_ns: u64,
        measure_end_ns: u64,
    ) -> Option<(u64, u64)> {
        let clock = self.shared.clock;
        let stop = &self.shared.stop;
        let producer = self.producer.as_mut();
        let recorder = &mut self.recorder;
        if sequence == 0 {
            wait_until(producer, recorder, clock, start_ns, stop, self.resolution);
        }
        while producer.in_flight() >= self.max_in_flight && !stop.load(Ordering::Relaxed) {
            poll_acks(producer, recorder, clock, Duration::from_millis(1));
        }
        let now = clock.now_ns();
        if now >= measure_end_ns {
            return None;
        }
        // Closed loop: the intended send time is the actual one.
        Some((now, now))
    }

    /// Drain: waits for outstanding acknowledgements, until the drain's deadline.
    fn drain(&mut self) {
        let clock = self.shared.clock;
        let producer = self.producer.as_mut();
        let recorder = &mut self.recorder;
        let deadline = self.shared.drain_deadline(clock.now_ns());
        while producer.in_flight() > 0 && clock.now_ns() < deadline {
            poll_acks(producer, recorder, clock, Duration::from_millis(10));
            recorder.roll(clock.now_ns());
        }
    }

    /// Ends the task: what is still unacknowledged is abandoned and counted, the client is
    /// closed, and the recorder sends its last second and its result.
    pub(super) fn finish(mut self) {
        let clock = self.shared.clock;
        let producer = self.producer.as_mut();
        let unacknowledged = producer.in_flight() as u64;
        let note = producer.ack_note();
        let closed = producer.closed_by_broker();
        producer.abandon();
        self.recorder.roll(clock.now_ns());
        drop(self.producer);
        self.recorder
            .finish(unacknowledged, note, closed, clock.now_ns());
    }
}

/// On a schedule: waits for the next intended send time (serving acknowledgements) and
/// returns (intended, now); None when the window is over, or when the wait ended far behind
/// schedule at its end.
#[inline]
fn next_on_schedule(
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    schedule: &mut Schedule,
    shared: &Shared,
    resolution: Duration,
    measure_end_ns: u64,
) -> Option<(u64, u64)> {
    let intended = schedule.next_ns();
    if intended >= measure_end_ns {
        return None;
    }
    let now = wait_until(
        producer,
        recorder,
        shared.clock,
        intended,
        &shared.stop,
        resolution,
    );
    if now >= measure_end_ns + BEHIND_SCHEDULE_GRACE_NS {
        // Far behind schedule at the end of the window: what was due and not sent is
        // counted, not sent late into the drain.
        recorder.not_sent(due_before(schedule, measure_end_ns));
        return None;
    }
    Some((intended, now))
}

/// How many messages the schedule has due before `end_ns`, counting the one it last gave
/// (which was due and is not sent); the schedule moves past them.
pub(super) fn due_before(schedule: &mut Schedule, end_ns: u64) -> u64 {
    let mut not_sent = 1;
    while schedule.next_ns() < end_ns {
        not_sent += 1;
    }
    not_sent
}

/// What became of one message.
pub(super) enum SendOutcome {
    /// The client took it.
    Handed,
    /// The client refused it (counted as a failure).
    Failed,
    /// Ctrl-C while the client's buffer was full.
    Stopped,
    /// The window ended (with its grace) while the client's buffer was full or it was
    /// reconnecting: the message was not sent (the caller counts it, as its mode says).
    WindowOver,
    /// The data file could not be read any more (counted as an error): the producer ends.
    PayloadFailed,
}

/// Builds the next message of producer `id` (body, envelope, key) and hands it to the client,
/// retrying while the client's buffer is full. `times` is (intended, when the wait ended).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(super) fn send_message(
    id: u32,
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    body: &mut BodySource,
    keys: &mut Keys,
    message: &mut Vec<u8>,
    sequence: &mut u64,
    (intended, now): (u64, u64),
    clock: Clock,
    shared: &Shared,
) -> SendOutcome {
    if body.fill(message).is_err() {
        recorder.send_failed("payload_read", clock.now_ns());
        return SendOutcome::PayloadFailed;
    }
    Envelope {
        producer: id,
        sequence: *sequence,
        intended_ns: intended,
    }
    .write(message);
    *sequence += 1;
    let key = keys.next_key();
    // The first attempt goes out at the time the wait ended (nothing blocks in between); a
    // retry after backpressure reads the clock again.
    let mut sent_ns = now;
    // Where the wait for the client is accounted: a full buffer or a lost connection.
    let mut waited_for_connection = false;
    loop {
        let outgoing = OutgoingMessage {
            key,
            payload: message,
            sent_ns,
        };
        match producer.send(outgoing) {
            Ok(()) => {
                if sent_ns != now {
                    account_wait(recorder, (now, sent_ns), waited_for_connection);
                }
                recorder.sent(*sequence - 1, intended, sent_ns, message.len());
                return SendOutcome::Handed;
            }
            Err(error @ (SendError::Backpressure | SendError::Unavailable(_))) => {
                // The client's buffer is full, or it is reconnecting: the schedule slips, and
                // the lag shows it; the message goes out (late) when the client takes it.
                if matches!(error, SendError::Unavailable(_)) {
                    waited_for_connection = true;
                    note_disconnected(producer, recorder, clock);
                }
                match wait_to_retry(
                    producer,
                    recorder,
                    clock,
                    shared,
                    now,
                    waited_for_connection,
                ) {
                    ControlFlow::Continue(retry_ns) => sent_ns = retry_ns,
                    ControlFlow::Break(outcome) => return outcome,
                }
            }
            Err(SendError::Failed(kind)) => {
                recorder.send_failed(&kind, clock.now_ns());
                return SendOutcome::Failed;
            }
        }
    }
}

/// Tells the recorder the client is disconnected: since it lost the broker, as it says, or
/// else from now.
#[inline]
fn note_disconnected(producer: &dyn Producer, recorder: &mut ProducerRecorder, clock: Clock) {
    let now_ns = clock.now_ns();
    let since = producer.disconnected_since().unwrap_or(now_ns);
    recorder.disconnected(since, now_ns, 0);
}

/// After the client refused a message (its buffer full, or reconnecting): serves
/// acknowledgements for up to a millisecond, then returns the time to try again at, or why
/// not to (Ctrl-C, or the window over with its grace). Giving up accounts the wait since
/// `now`, to a lost connection when `waited_for_connection`, else to a full buffer.
#[inline]
fn wait_to_retry(
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    clock: Clock,
    shared: &Shared,
    now: u64,
    waited_for_connection: bool,
) -> ControlFlow<SendOutcome, u64> {
    poll_acks(producer, recorder, clock, Duration::from_millis(1));
    if shared.stop.load(Ordering::Relaxed) {
        account_wait(recorder, (now, clock.now_ns()), waited_for_connection);
        return ControlFlow::Break(SendOutcome::Stopped);
    }
    let sent_ns = clock.now_ns();
    // Each second's row gets this task's (empty) interval on time while it waits.
    recorder.roll(sent_ns);
    if sent_ns
        >= shared
            .measure_end()
            .saturating_add(BEHIND_SCHEDULE_GRACE_NS)
    {
        account_wait(recorder, (now, sent_ns), waited_for_connection);
        return ControlFlow::Break(SendOutcome::WindowOver);
    }
    ControlFlow::Continue(sent_ns)
}

/// Accounts a send's wait for the client, (from, to): to a lost connection, or to a full
/// buffer.
#[inline]
fn account_wait(recorder: &mut ProducerRecorder, (from, to): (u64, u64), connection: bool) {
    if connection {
        recorder.unavailable(from, to);
    } else {
        recorder.buffer_full(from, to);
    }
}

/// Hands the acknowledgements that have arrived to the recorder, at the time the driver saw
/// each arrive, or else the time the first of them was handed over (one broker response
/// acknowledges a whole batch).
#[inline]
pub(super) fn poll_acks(
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    clock: Clock,
    timeout: Duration,
) {
    let mut now = 0;
    let mut failed = 0;
    producer.poll(timeout, &mut |ack| {
        failed += u64::from(ack.result.is_err());
        let arrived = ack.acknowledged_ns.unwrap_or_else(|| {
            if now == 0 {
                now = clock.now_ns();
            }
            now
        });
        recorder.acknowledged(&ack, arrived)
    });
    if let Some(since) = producer.disconnected_since() {
        recorder.disconnected(since, clock.now_ns(), failed);
    }
    let blocked = producer.blocked_since();
    if blocked.is_some() || recorder.is_blocked() {
        recorder.blocked(blocked, clock.now_ns());
    }
}

/// Longest sleep of a producer whose acknowledgements are stamped by the client: they are
/// recorded into their second's row when the task wakes.
const MAX_STAMPED_SLEEP_NS: u64 = 20_000_000;

/// Waits until `intended_ns`, serving acknowledgements meanwhile, and returns the time it
/// stopped waiting. Never spins.
pub(super) fn wait_until(
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    clock: Clock,
    intended_ns: u64,
    stop: &AtomicBool,
    resolution: Duration,
) -> u64 {
    loop {
        let now = clock.now_ns();
        if now >= intended_ns || stop.load(Ordering::Relaxed) {
            return now;
        }
        let remaining = intended_ns - now;
        poll_acks(producer, recorder, clock, Duration::ZERO);
        recorder.roll(now);
        if remaining > 3_000_000 {
            let wait = (remaining - 2_000_000).min(100_000_000);
            if producer.stamps_acknowledgements() {
                // Acknowledgements keep their arrival times while they wait: sleep, and take
                // them all at once (short sleeps keep per-second rows close to the stamps).
                std::thread::sleep(Duration::from_nanos(wait.min(MAX_STAMPED_SLEEP_NS)));
            } else {
                poll_acks(producer, recorder, clock, Duration::from_nanos(wait));
            }
        } else {
            // Spinning would take a core from the broker on a small machine, and a timer per
            // message costs more CPU than the send itself. So a producer sleeps at least the
            // schedule resolution and then sends everything that has come due; each message's
            // lateness is recorded as schedule lag and is part of its publish latency.
            std::thread::sleep(Duration::from_nanos(remaining).max(resolution));
        }
    }
}
