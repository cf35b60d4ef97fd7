//! Producer tasks sharing one thread: many topics must not mean as many threads, each waking
//! for its own sends. The thread sends every task's messages at their intended times, the
//! earliest first (a heap of each task's next intended send), and serves all tasks'
//! acknowledgements every few milliseconds. Each task keeps its producer, schedule, recorder
//! and ledger; what the thread changes is only that a message may wait for another task's
//! send that came due first — schedule lag, recorded as always.
//!
//! Only for open-loop tasks whose client stamps acknowledgements as they arrive
//! ([`Producer::stamps_acknowledgements`]): a later poll then does not change their times; and
//! whose client sends what it took without being polled ([`Producer::sends_in_background`]):
//! a client that writes its buffer when polled would hold a message until the next serving.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::*;

/// How often the thread hands every task's acknowledgements to its recorder and rolls its
/// seconds, while it has sends to wait for.
const SERVE_EVERY_NS: u64 = 5_000_000;

/// One task of the group and what it has sent.
struct Member {
    task: ProducerTask,
    sequence: u64,
    since_poll: u32,
}

pub(super) struct ProducerGroup {
    pub(super) tasks: Vec<ProducerTask>,
}

impl ProducerGroup {
    pub(super) fn run(self) {
        brokerbench_driver::set_precise_sleep();
        let Some(first) = self.tasks.first() else {
            return;
        };
        let shared = first.shared.clone();
        let resolution = first.resolution;
        let mut members: Vec<Member> = self
            .tasks
            .into_iter()
            .map(|task| Member {
                task,
                sequence: 0,
                since_poll: 0,
            })
            .collect();
        // Each task's next intended send time, earliest on top.
        let mut due: BinaryHeap<Reverse<(u64, usize)>> = members
            .iter_mut()
            .enumerate()
            .filter_map(|(i, m)| Some(Reverse((m.task.schedule.as_mut()?.next_ns(), i))))
            .collect();
        send_all(&mut members, &mut due, &shared, resolution);
        drain(&mut members, &shared);
        for m in members {
            m.task.finish();
        }
    }
}

/// Sends every task's messages at their intended times, the earliest first, until every
/// task's window is over (or Ctrl-C); serves all tasks' acknowledgements meanwhile.
fn send_all(
    members: &mut [Member],
    due: &mut BinaryHeap<Reverse<(u64, usize)>>,
    shared: &Shared,
    resolution: Duration,
) {
    let clock = shared.clock;
    let stop = &shared.stop;
    let mut message = Vec::with_capacity(1024);
    let mut end = u64::MAX;
    let mut next_serve = 0;
    while let Some(Reverse((intended, i))) = due.pop() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let measure_end_ns = shared.measure_end();
        if measure_end_ns != end {
            end = measure_end_ns;
            for m in members.iter_mut() {
                m.task.recorder.follow_end(end);
            }
        }
        if intended >= end {
            // This task's window is over; the others' may not be (their next sends come
            // later, so in practice all end together).
            continue;
        }
        let now = wait_serving(members, clock, intended, stop, resolution, &mut next_serve);
        let m = &mut members[i];
        if now >= end + BEHIND_SCHEDULE_GRACE_NS {
            // Far behind at the end of the window: what was due is counted, not sent.
            if let Some(schedule) = m.task.schedule.as_mut() {
                m.task.recorder.not_sent(due_before(schedule, end));
            }
            continue;
        }
        match m.send(&mut message, (intended, now), shared) {
            SendOutcome::Handed | SendOutcome::Failed => {}
            // Due in the window and not sent; the task's next turn counts what else was due.
            SendOutcome::WindowOver => m.task.recorder.not_sent(1),
            SendOutcome::Stopped => break,
            // This task ends; the others go on.
            SendOutcome::PayloadFailed => continue,
        }
        m.count_send(clock);
        if let Some(schedule) = m.task.schedule.as_mut() {
            due.push(Reverse((schedule.next_ns(), i)));
        }
    }
}

/// Waits until `intended`, serving every task's acknowledgements every few milliseconds
/// (`next_serve`: when next), and returns the time it stopped waiting.
#[inline]
fn wait_serving(
    members: &mut [Member],
    clock: Clock,
    intended: u64,
    stop: &AtomicBool,
    resolution: Duration,
    next_serve: &mut u64,
) -> u64 {
    loop {
        let now = clock.now_ns();
        if now >= *next_serve {
            serve_all(members, clock, now);
            *next_serve = now + SERVE_EVERY_NS;
        }
        if now >= intended || stop.load(Ordering::Relaxed) {
            break now;
        }
        let remaining = intended - now;
        let sleep = if remaining > 3_000_000 {
            (remaining - 2_000_000).min(next_serve.saturating_sub(now).max(1))
        } else {
            remaining.max(resolution.as_nanos() as u64)
        };
        std::thread::sleep(Duration::from_nanos(sleep));
    }
}

impl Member {
    /// Builds this task's next message and hands it to its client (see [`send_message`]).
    #[inline]
    fn send(&mut self, message: &mut Vec<u8>, times: (u64, u64), shared: &Shared) -> SendOutcome {
        let task = &mut self.task;
        send_message(
            task.id,
            task.producer.as_mut(),
            &mut task.recorder,
            &mut task.body,
            &mut task.keys,
            message,
            &mut self.sequence,
            times,
            shared.clock,
            shared,
        )
    }

    /// Counts a send; every 64th also hands the task's acknowledgements to its recorder.
    #[inline]
    fn count_send(&mut self, clock: Clock) {
        self.since_poll += 1;
        if self.since_poll >= 64 {
            self.since_poll = 0;
            poll_acks(
                self.task.producer.as_mut(),
                &mut self.task.recorder,
                clock,
                Duration::ZERO,
            );
        }
    }
}

/// Drain: waits for every task's outstanding acknowledgements, until the drain's deadline.
fn drain(members: &mut [Member], shared: &Shared) {
    let clock = shared.clock;
    let deadline = shared.drain_deadline(clock.now_ns());
    loop {
        let now = clock.now_ns();
        serve_all(members, clock, now);
        if now >= deadline || members.iter().all(|m| m.task.producer.in_flight() == 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every task's acknowledgements to its recorder, and its second rolled.
fn serve_all(members: &mut [Member], clock: Clock, now: u64) {
    for m in members {
        poll_acks(
            m.task.producer.as_mut(),
            &mut m.task.recorder,
            clock,
            Duration::ZERO,
        );
        m.task.recorder.roll(now);
    }
}
