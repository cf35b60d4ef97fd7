//! Shard 0's side of the gate: it listens for the other shards, names the start once every
//! shard arrived and every subscription's consumers are ready, and says when all is drained.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brokerbench_engine::shard::Assignments;
use brokerbench_engine::Clock;

use super::protocol::{send, GateSettings, Message};

/// Between the coordinator's decision and the start: time for the message to arrive.
const START_AFTER: Duration = Duration::from_millis(300);

/// A shard's last word in the drain.
struct Progress {
    /// Its producers are done.
    done: bool,
    /// Per topic: what its consumers are to receive for its producers' acknowledged messages.
    expected: Vec<u64>,
    /// Per topic: what its consumers received.
    received: Vec<u64>,
}

#[derive(Default)]
pub(super) struct State {
    /// Connected shards' streams, for messages to them.
    members: BTreeMap<u32, Arc<Mutex<TcpStream>>>,
    assigned: BTreeMap<u32, Vec<(u32, u32, Vec<usize>)>>,
    progress: BTreeMap<u32, Progress>,
    finished: BTreeSet<u32>,
    /// Shards whose connection ended before they finished.
    pub(super) lost: Vec<u32>,
    /// Why the run cannot go on (a shard of another run or workload).
    refused: Option<String>,
    started: bool,
}

pub struct Coordinator {
    settings: GateSettings,
    pub(super) state: Arc<Mutex<State>>,
    drained: bool,
}

impl Coordinator {
    pub(super) fn listen(
        settings: GateSettings,
        listener: TcpListener,
    ) -> anyhow::Result<Coordinator> {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let expected = settings.clone();
        std::thread::Builder::new()
            .name("shard-gate".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let state = shared.clone();
                    let settings = expected.clone();
                    let _ = std::thread::Builder::new()
                        .name("shard-peer".into())
                        .spawn(move || serve_member(stream, &settings, &state));
                }
            })?;
        Ok(Coordinator {
            settings,
            state,
            drained: false,
        })
    }

    fn broadcast(&self, message: &Message) {
        let members: Vec<_> = self
            .state
            .lock()
            .map(|s| s.members.values().cloned().collect())
            .unwrap_or_default();
        for member in members {
            if let Ok(mut stream) = member.lock() {
                let _ = send(&mut stream, message);
            }
        }
    }

    fn abort(&self, reason: String) -> Result<u64, String> {
        self.broadcast(&Message::Abort {
            reason: reason.clone(),
        });
        Err(reason)
    }

    pub(super) fn start(
        &mut self,
        local: &mut dyn FnMut() -> Assignments,
        ready: &dyn Fn(u32, &[usize]) -> bool,
        stop: &AtomicBool,
    ) -> Result<u64, String> {
        let deadline = Instant::now() + self.settings.timeout;
        let count = self.settings.shard.count;
        loop {
            let mine = local();
            let (present, waiting, refused) = {
                let mut state = self.state.lock().map_err(|e| e.to_string())?;
                let present: Vec<u32> = (1..count)
                    .filter(|i| state.assigned.contains_key(i))
                    .collect();
                // Each subscription's consumers, shard by shard.
                let mut all: BTreeMap<(u32, u32), Vec<usize>> = mine.clone();
                for reports in state.assigned.values() {
                    for (topic, subscription, assigned) in reports {
                        all.entry((*topic, *subscription))
                            .or_default()
                            .extend(assigned);
                    }
                }
                let waiting: Vec<String> = all
                    .iter()
                    .filter(|(&(topic, _), assigned)| !ready(topic, assigned))
                    .map(|(&(topic, subscription), assigned)| {
                        format!("topic {topic} subscription {subscription} (assigned per consumer: {assigned:?})")
                    })
                    .collect();
                // Decided under the lock: a shard that leaves from now on is lost, not late.
                if state.refused.is_none()
                    && present.len() as u32 == count - 1
                    && waiting.is_empty()
                {
                    state.started = true;
                }
                (present, waiting, state.refused.clone())
            };
            if let Some(reason) = refused {
                return self.abort(reason);
            }
            if present.len() as u32 == count - 1 && waiting.is_empty() {
                let at_ns = Clock::process().now_ns() + START_AFTER.as_nanos() as u64;
                self.broadcast(&Message::Start { at_ns });
                return Ok(at_ns);
            }
            if stop.load(Ordering::Relaxed) {
                return self.abort("shard 0 (the coordinator) was interrupted".into());
            }
            if Instant::now() > deadline {
                let missing: Vec<String> = (1..count)
                    .filter(|i| !present.contains(i))
                    .map(|i| i.to_string())
                    .collect();
                let reason = if !missing.is_empty() {
                    format!(
                        "shard{} {} of {count} never arrived within {:?} (run id {}; every shard runs `brokerbench run --shard I/{count} --run-id {} --coordinator {}` with the same workload)",
                        if missing.len() > 1 { "s" } else { "" },
                        missing.join(", "),
                        self.settings.timeout,
                        self.settings.run_id,
                        self.settings.run_id,
                        self.settings.coordinator
                    )
                } else {
                    format!(
                        "every shard arrived, but consumers were not ready within {:?}: {}",
                        self.settings.timeout,
                        waiting.join("; ")
                    )
                };
                return self.abort(reason);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn drained(
        &mut self,
        producers_done: bool,
        expected: &[u64],
        received: &[u64],
    ) -> bool {
        if self.drained {
            return true;
        }
        let done = {
            let Ok(mut state) = self.state.lock() else {
                return false;
            };
            state.progress.insert(
                0,
                Progress {
                    done: producers_done,
                    expected: expected.to_vec(),
                    received: received.to_vec(),
                },
            );
            let lost = state.lost.clone();
            let count = self.settings.shard.count;
            let reporting: Vec<&Progress> = (0..count)
                .filter(|i| !lost.contains(i))
                .filter_map(|i| state.progress.get(&i))
                .collect();
            let all = reporting.len() as u32 == count - lost.len() as u32;
            let sum = |pick: fn(&Progress) -> &Vec<u64>| {
                let mut total = vec![0u64; expected.len()];
                for p in &reporting {
                    for (t, v) in total.iter_mut().zip(pick(p)) {
                        *t += v;
                    }
                }
                total
            };
            all && reporting.iter().all(|p| p.done)
                && sum(|p| &p.received)
                    .iter()
                    .zip(sum(|p| &p.expected))
                    .all(|(r, e)| *r >= e)
        };
        if done {
            self.drained = true;
            self.broadcast(&Message::Drained);
        }
        done
    }

    pub(super) fn finish(&mut self) {
        // Consumers may stop at their drain timeout without the word: tell everyone.
        self.broadcast(&Message::Drained);
        let deadline = Instant::now() + self.settings.timeout;
        let count = self.settings.shard.count;
        while Instant::now() < deadline {
            let all = self
                .state
                .lock()
                .is_ok_and(|s| (1..count).all(|i| s.finished.contains(&i) || s.lost.contains(&i)));
            if all {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "warning: shard 0 stopped waiting for the other shards to finish after {:?}; the run's topics may be removed while they still read",
            self.settings.timeout
        );
    }
}

/// Serves one connection to shard 0.
fn serve_member(stream: TcpStream, settings: &GateSettings, state: &Mutex<State>) {
    let _ = stream.set_nodelay(true);
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(writer));
    let mut shard = None;
    let clock = Clock::process();
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Message>(&line) else {
            continue;
        };
        match message {
            Message::Hello {
                shard: index,
                shards,
                run_id,
                identity,
            } => {
                let Ok(mut s) = state.lock() else { return };
                let problem = hello_problem(settings, &s, index, shards, &run_id, &identity);
                if let Some(problem) = problem {
                    reply(
                        &writer,
                        &Message::Abort {
                            reason: problem.clone(),
                        },
                    );
                    s.refused.get_or_insert(problem);
                    return;
                }
                s.members.insert(index, writer.clone());
                shard = Some(index);
                drop(s);
                reply(&writer, &Message::Welcome);
            }
            Message::Ping { sent_ns } => {
                let at_ns = clock.now_ns();
                reply(&writer, &Message::Pong { sent_ns, at_ns });
            }
            report => note_report(report, shard, state),
        }
    }
    // The connection ended.
    connection_ended(shard, state);
}

/// Why shard `index` of `shards` of run `run_id`, running what `identity` digests, cannot
/// join the run, if it cannot.
fn hello_problem(
    settings: &GateSettings,
    s: &State,
    index: u32,
    shards: u32,
    run_id: &str,
    identity: &str,
) -> Option<String> {
    if shards != settings.shard.count || run_id != settings.run_id {
        Some(format!(
            "a shard {index}/{shards} of run '{run_id}' connected to shard 0 of run '{}' with {} shards; give every shard the same --run-id and --shard I/N",
            settings.run_id, settings.shard.count
        ))
    } else if identity != settings.identity {
        Some(format!(
            "shard {index} runs another workload or driver than shard 0 (after --set and defaults); every shard of a run needs the same files and settings"
        ))
    } else if index == 0 || index >= shards {
        Some(format!(
            "a second shard 0 or shard {index} of {shards} connected"
        ))
    } else if s.started {
        Some(format!(
            "shard {index} arrived after the run had started; start every shard within --shard-timeout of the others"
        ))
    } else if s.members.contains_key(&index) {
        Some(format!(
            "shard {index} connected twice; is it running twice?"
        ))
    } else {
        None
    }
}

/// Sends `message` to a member, if its stream can be had; a failed send shows later.
fn reply(writer: &Mutex<TcpStream>, message: &Message) {
    if let Ok(mut w) = writer.lock() {
        let _ = send(&mut w, message);
    }
}

/// Notes what a member that said hello (`shard`) reports: its consumers' assignments, its
/// progress in the drain, or that it finished. Other messages are ignored.
fn note_report(message: Message, shard: Option<u32>, state: &Mutex<State>) {
    match message {
        Message::Assigned { subscriptions } => {
            if let (Some(index), Ok(mut s)) = (shard, state.lock()) {
                s.assigned.insert(index, subscriptions);
            }
        }
        Message::Progress {
            done,
            expected,
            received,
        } => {
            if let (Some(index), Ok(mut s)) = (shard, state.lock()) {
                s.progress.insert(
                    index,
                    Progress {
                        done,
                        expected,
                        received,
                    },
                );
            }
        }
        Message::Finished => {
            if let (Some(index), Ok(mut s)) = (shard, state.lock()) {
                s.finished.insert(index);
            }
        }
        _ => {}
    }
}

/// A member's connection ended: before the start it may come back; after it, unless it had
/// finished, it is lost.
fn connection_ended(shard: Option<u32>, state: &Mutex<State>) {
    if let (Some(index), Ok(mut s)) = (shard, state.lock()) {
        s.members.remove(&index);
        if !s.started {
            // It may come back before the start.
            s.assigned.remove(&index);
        } else if !s.finished.contains(&index) {
            s.lost.push(index);
        }
    }
}
