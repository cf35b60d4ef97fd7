//! Producer tasks sharing one thread: many topics must not mean as many threads, each waking
//! for its own sends. The thread sends every task's messages at their intended times, the
//! earliest first (a heap of each task's next intended send), and serves all tasks'
//! acknowledgements every few milliseconds. Each task keeps its producer, schedule, recorder
//! and ledger; what the thread changes is only that a message may wait for another task's
//! send that came due first — schedule lag, recorded as always.
//!
//! Only for open-loop tasks whose client stamps acknowledgements as they arrive
//! ([`Producer::stamps_acknowledgements`]): a later poll then does not change their times.

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
        let clock = shared.clock;
        let stop = &shared.stop;
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
                for m in &mut members {
                    m.task.recorder.follow_end(end);
                }
            }
            if intended >= end {
                // This task's window is over; the others' may not be (their next sends come
                // later, so in practice all end together).
                continue;
            }
            let now = loop {
                let now = clock.now_ns();
                if now >= next_serve {
                    serve_all(&mut members, clock, now);
                    next_serve = now + SERVE_EVERY_NS;
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
            };
            let m = &mut members[i];
            let task = &mut m.task;
            if now >= end + BEHIND_SCHEDULE_GRACE_NS {
                // Far behind at the end of the window: what was due is counted, not sent.
                if let Some(schedule) = task.schedule.as_mut() {
                    let mut not_sent = 1;
                    while schedule.next_ns() < end {
                        not_sent += 1;
                    }
                    task.recorder.not_sent(not_sent);
                }
                continue;
            }
            let sent = send_message(
                task.id,
                task.producer.as_mut(),
                &mut task.recorder,
                &mut task.body,
                &mut task.keys,
                &mut message,
                &mut m.sequence,
                (intended, now),
                clock,
                &shared,
            );
            match sent {
                SendOutcome::Handed | SendOutcome::Failed => {}
                // Due in the window and not sent; the task's next turn counts what else was due.
                SendOutcome::WindowOver => task.recorder.not_sent(1),
                SendOutcome::Stopped => break,
                // This task ends; the others go on.
                SendOutcome::PayloadFailed => continue,
            }
            m.since_poll += 1;
            if m.since_poll >= 64 {
                m.since_poll = 0;
                poll_acks(
                    task.producer.as_mut(),
                    &mut task.recorder,
                    clock,
                    Duration::ZERO,
                );
            }
            if let Some(schedule) = task.schedule.as_mut() {
                due.push(Reverse((schedule.next_ns(), i)));
            }
        }
        // Drain: wait for every task's outstanding acknowledgements.
        let deadline = shared.drain_deadline(clock.now_ns());
        loop {
            let now = clock.now_ns();
            serve_all(&mut members, clock, now);
            if now >= deadline || members.iter().all(|m| m.task.producer.in_flight() == 0) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for m in members {
            let mut task = m.task;
            let unacknowledged = task.producer.in_flight() as u64;
            let note = task.producer.ack_note();
            let closed = task.producer.closed_by_broker();
            task.producer.abandon();
            task.recorder.roll(clock.now_ns());
            drop(task.producer);
            task.recorder
                .finish(unacknowledged, note, closed, clock.now_ns());
        }
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
