//! How the shards of a run meet: shard 0 coordinates over TCP, the others connect to it.
//!
//! One line of JSON per message. A shard says hello (its index, the run id and a digest of
//! its workload, so that shards of different runs or workloads never mix), measures its
//! clock against the coordinator's (the round trip with the least delay of a few pings), then
//! reports its consumers' assignments until the coordinator — every shard arrived and every
//! subscription's consumers, over all shards, ready — names one start time. In the drain each
//! shard reports what its producers had acknowledged and its consumers received, until the
//! coordinator says everything was received; at the end each says it finished, and shard 0,
//! which removes what the run created, waits for them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brokerbench_engine::shard::{Assignments, Gate, Shard};
use brokerbench_engine::Clock;
use serde::{Deserialize, Serialize};

/// Pings to estimate a shard's clock offset; the one with the shortest round trip counts.
const PINGS: usize = 16;
/// How often a shard repeats its state to the coordinator.
const REPORT_EVERY: Duration = Duration::from_millis(100);
/// Between the coordinator's decision and the start: time for the message to arrive.
const START_AFTER: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Message {
    Hello {
        shard: u32,
        shards: u32,
        run_id: String,
        identity: String,
    },
    Welcome,
    Ping {
        sent_ns: u64,
    },
    Pong {
        sent_ns: u64,
        at_ns: u64,
    },
    Assigned {
        subscriptions: Vec<(u32, u32, Vec<usize>)>,
    },
    Start {
        at_ns: u64,
    },
    Progress {
        done: bool,
        expected: Vec<u64>,
        received: Vec<u64>,
    },
    Drained,
    Finished,
    Abort {
        reason: String,
    },
}

fn send(stream: &mut TcpStream, message: &Message) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// What a shard needs to find the others.
#[derive(Debug, Clone)]
pub struct GateSettings {
    pub shard: Shard,
    pub run_id: String,
    /// host:port of shard 0, as the other shards reach it.
    pub coordinator: String,
    /// How long shards wait for each other before the run starts, and shard 0 for the
    /// others to finish.
    pub timeout: Duration,
    /// A digest of the workload and driver: shards of one run run the same.
    pub identity: String,
}

/// This shard's clock against the coordinator's.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ClockEstimate {
    /// Coordinator's clock minus this shard's, ns (0 on shard 0).
    pub offset_ns: i64,
    /// Round trip of the ping the estimate comes from, ns: the offset is known to ± half.
    pub round_trip_ns: u64,
}

/// The gate of one shard: shard 0 coordinates, the others are members.
pub enum TcpGate {
    Coordinator(Coordinator),
    Member(Member),
}

impl TcpGate {
    /// Shard 0 listens on `listen` (from now on, so that early shards can connect); the
    /// others connect when the run reaches the gate.
    pub fn new(settings: GateSettings, listen: Option<SocketAddr>) -> anyhow::Result<TcpGate> {
        if settings.shard.is_coordinator() {
            let address = match listen {
                Some(a) => a,
                None => listen_address(&settings.coordinator)?,
            };
            let listener = TcpListener::bind(address).map_err(|e| {
                anyhow::anyhow!(
                    "shard 0 coordinates the run and cannot listen on {address} (from --coordinator {}): {e}; choose another port",
                    settings.coordinator
                )
            })?;
            Ok(TcpGate::Coordinator(Coordinator::listen(
                settings, listener,
            )?))
        } else {
            Ok(TcpGate::Member(Member {
                settings,
                stream: None,
                inbox: None,
                clock: ClockEstimate::default(),
                drained: false,
                last_report: None,
            }))
        }
    }

    pub fn clock(&self) -> ClockEstimate {
        match self {
            TcpGate::Coordinator(_) => ClockEstimate::default(),
            TcpGate::Member(m) => m.clock,
        }
    }

    /// Shards that left before saying they had finished (shard 0 only).
    pub fn lost(&self) -> Vec<u32> {
        match self {
            TcpGate::Coordinator(c) => c.state.lock().map(|s| s.lost.clone()).unwrap_or_default(),
            TcpGate::Member(_) => Vec::new(),
        }
    }
}

/// Where shard 0 listens for `--coordinator HOST:PORT`: that address when HOST is an IP
/// address, otherwise every interface on PORT (HOST is how the others name shard 0, e.g.
/// the Kubernetes service name of pod 0).
fn listen_address(coordinator: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(address) = coordinator.parse::<SocketAddr>() {
        return Ok(address);
    }
    let port = coordinator
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--coordinator {coordinator}: give HOST:PORT, the address at which the other shards reach shard 0"
            )
        })?;
    Ok(SocketAddr::from(([0, 0, 0, 0], port)))
}

impl Gate for TcpGate {
    fn start(
        &mut self,
        local: &mut dyn FnMut() -> Assignments,
        ready: &dyn Fn(u32, &[usize]) -> bool,
        stop: &AtomicBool,
    ) -> Result<u64, String> {
        match self {
            TcpGate::Coordinator(c) => c.start(local, ready, stop),
            TcpGate::Member(m) => m.start(local, stop),
        }
    }

    fn drained(&mut self, producers_done: bool, expected: &[u64], received: &[u64]) -> bool {
        match self {
            TcpGate::Coordinator(c) => c.drained(producers_done, expected, received),
            TcpGate::Member(m) => m.drained(producers_done, expected, received),
        }
    }

    fn finish(&mut self) {
        match self {
            TcpGate::Coordinator(c) => c.finish(),
            TcpGate::Member(m) => m.finish(),
        }
    }
}

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
struct State {
    /// Connected shards' streams, for messages to them.
    members: BTreeMap<u32, Arc<Mutex<TcpStream>>>,
    assigned: BTreeMap<u32, Vec<(u32, u32, Vec<usize>)>>,
    progress: BTreeMap<u32, Progress>,
    finished: BTreeSet<u32>,
    /// Shards whose connection ended before they finished.
    lost: Vec<u32>,
    /// Why the run cannot go on (a shard of another run or workload).
    refused: Option<String>,
    started: bool,
}

pub struct Coordinator {
    settings: GateSettings,
    state: Arc<Mutex<State>>,
    drained: bool,
}

impl Coordinator {
    fn listen(settings: GateSettings, listener: TcpListener) -> anyhow::Result<Coordinator> {
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

    fn start(
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

    fn drained(&mut self, producers_done: bool, expected: &[u64], received: &[u64]) -> bool {
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

    fn finish(&mut self) {
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

pub struct Member {
    settings: GateSettings,
    stream: Option<TcpStream>,
    inbox: Option<Receiver<Message>>,
    clock: ClockEstimate,
    drained: bool,
    last_report: Option<Instant>,
}

impl Member {
    /// Err when interrupted, or past `deadline` (with `late()`'s message).
    fn keep_waiting(
        &self,
        stop: &AtomicBool,
        deadline: Instant,
        late: impl FnOnce() -> String,
    ) -> Result<(), String> {
        if stop.load(Ordering::Relaxed) {
            return Err(format!("shard {} was interrupted", self.settings.shard));
        }
        if Instant::now() > deadline {
            return Err(late());
        }
        Ok(())
    }

    fn coordinator_gone(&self) -> String {
        format!(
            "shard 0 (the coordinator at {}) closed the connection",
            self.settings.coordinator
        )
    }

    /// Connects (again and again until the deadline: shard 0 may start later), says hello
    /// and measures the clock.
    fn connect(&mut self, deadline: Instant, stop: &AtomicBool) -> Result<(), String> {
        let stream = self.reach(deadline, stop)?;
        let _ = stream.set_nodelay(true);
        let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
        let rx = inbox(stream)?;
        let shard = self.settings.shard;
        send(
            &mut writer,
            &Message::Hello {
                shard: shard.index,
                shards: shard.count,
                run_id: self.settings.run_id.clone(),
                identity: self.settings.identity.clone(),
            },
        )
        .map_err(|e| e.to_string())?;
        match self.answer(&rx, deadline)? {
            Message::Welcome => {}
            Message::Abort { reason } => return Err(reason),
            other => return Err(format!("shard 0 answered {other:?} to hello")),
        }
        self.clock = self.measure_clock(&mut writer, &rx, deadline)?;
        self.stream = Some(writer);
        self.inbox = Some(rx);
        Ok(())
    }

    /// A connection to shard 0, tried again and again until the deadline (shard 0 may start
    /// later).
    fn reach(&self, deadline: Instant, stop: &AtomicBool) -> Result<TcpStream, String> {
        let address = &self.settings.coordinator;
        let mut last_error;
        let stream = loop {
            let attempt = address
                .to_socket_addrs()
                .map_err(|e| e.to_string())
                .and_then(|mut a| {
                    a.next()
                        .ok_or_else(|| "the name has no address".to_string())
                })
                .and_then(|a| {
                    TcpStream::connect_timeout(&a, Duration::from_secs(1))
                        .map_err(|e| e.to_string())
                });
            match attempt {
                Ok(stream) => break stream,
                Err(e) => last_error = e,
            }
            self.keep_waiting(stop, deadline, || {
                format!(
                    "shard {} could not reach shard 0 (the coordinator) at {address} within {:?}: {last_error}; start shard 0 with the same --coordinator, or check the address",
                    self.settings.shard, self.settings.timeout
                )
            })?;
            std::thread::sleep(Duration::from_millis(200));
        };
        Ok(stream)
    }

    /// The coordinator's next message, or why none came before `deadline`.
    fn answer(&self, rx: &Receiver<Message>, deadline: Instant) -> Result<Message, String> {
        rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| match e {
                mpsc::RecvTimeoutError::Timeout => format!(
                    "shard 0 (the coordinator at {}) did not answer within {:?}",
                    self.settings.coordinator, self.settings.timeout
                ),
                mpsc::RecvTimeoutError::Disconnected => self.coordinator_gone(),
            })
    }

    /// This shard's clock against the coordinator's: of a few pings, the one with the
    /// shortest round trip.
    fn measure_clock(
        &self,
        writer: &mut TcpStream,
        rx: &Receiver<Message>,
        deadline: Instant,
    ) -> Result<ClockEstimate, String> {
        let clock = Clock::process();
        let mut best: Option<ClockEstimate> = None;
        for _ in 0..PINGS {
            let sent_ns = clock.now_ns();
            send(writer, &Message::Ping { sent_ns }).map_err(|e| e.to_string())?;
            loop {
                match self.answer(rx, deadline)? {
                    Message::Pong { sent_ns: s, at_ns } if s == sent_ns => {
                        let back = clock.now_ns();
                        let round_trip_ns = back.saturating_sub(sent_ns);
                        let offset_ns = at_ns as i64 - (sent_ns / 2 + back / 2) as i64;
                        if best.is_none_or(|b| round_trip_ns < b.round_trip_ns) {
                            best = Some(ClockEstimate {
                                offset_ns,
                                round_trip_ns,
                            });
                        }
                        break;
                    }
                    Message::Abort { reason } => return Err(reason),
                    _ => {}
                }
            }
        }
        Ok(best.unwrap_or_default())
    }

    fn start(
        &mut self,
        local: &mut dyn FnMut() -> Assignments,
        stop: &AtomicBool,
    ) -> Result<u64, String> {
        // A little longer than shard 0 waits: its word on who never came arrives first.
        let deadline = Instant::now() + self.settings.timeout + Duration::from_secs(5);
        self.connect(deadline, stop)?;
        let mut reported: Option<Assignments> = None;
        let mut last = Instant::now();
        loop {
            let mine = local();
            if reported.as_ref() != Some(&mine) || last.elapsed() >= REPORT_EVERY {
                let subscriptions = mine.iter().map(|(&(t, s), a)| (t, s, a.clone())).collect();
                let stream = self.stream.as_mut().expect("connected");
                send(stream, &Message::Assigned { subscriptions })
                    .map_err(|_| self.coordinator_gone())?;
                reported = Some(mine);
                last = Instant::now();
            }
            match self.inbox.as_ref().expect("connected").try_recv() {
                Ok(Message::Start { at_ns }) => {
                    // The coordinator's time on this shard's clock.
                    return Ok((at_ns as i64 - self.clock.offset_ns) as u64);
                }
                Ok(Message::Abort { reason }) => return Err(reason),
                Ok(_) | Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return Err(self.coordinator_gone()),
            }
            self.keep_waiting(stop, deadline, || {
                format!(
                    "shard 0 (the coordinator at {}) did not start the run within {:?}",
                    self.settings.coordinator, self.settings.timeout
                )
            })?;
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn drained(&mut self, producers_done: bool, expected: &[u64], received: &[u64]) -> bool {
        if self.drained {
            return true;
        }
        if self.last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
            if let Some(stream) = self.stream.as_mut() {
                let _ = send(
                    stream,
                    &Message::Progress {
                        done: producers_done,
                        expected: expected.to_vec(),
                        received: received.to_vec(),
                    },
                );
            }
            self.last_report = Some(Instant::now());
        }
        if let Some(inbox) = &self.inbox {
            while let Ok(message) = inbox.try_recv() {
                if matches!(message, Message::Drained) {
                    self.drained = true;
                }
            }
        }
        self.drained
    }

    fn finish(&mut self) {
        if let Some(stream) = self.stream.as_mut() {
            let _ = send(stream, &Message::Finished);
            let _ = stream.flush();
        }
    }
}

/// The messages read from shard 0's `stream`, by a thread of their own until it ends.
fn inbox(stream: TcpStream) -> Result<Receiver<Message>, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("shard-gate".into())
        .spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if let Ok(message) = serde_json::from_str::<Message>(&line) {
                    if tx.send(message).is_err() {
                        break;
                    }
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(rx)
}

/// A digest of the run's resolved workload and driver name (FNV-1a): shards compare it.
pub fn identity(workload: &serde_json::Value, driver: &str) -> String {
    let text = format!("{driver}\n{workload}");
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(index: u32, count: u32, port: u16, timeout_ms: u64) -> GateSettings {
        GateSettings {
            shard: Shard { index, count },
            run_id: "gate-test".into(),
            coordinator: format!("127.0.0.1:{port}"),
            timeout: Duration::from_millis(timeout_ms),
            identity: "same".into(),
        }
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// One consumer of topic 0, subscription 0 per shard, with `assigned` partitions.
    fn assignments(assigned: usize) -> Assignments {
        BTreeMap::from([((0, 0), vec![assigned])])
    }

    #[test]
    fn shards_start_together_once_every_consumer_is_ready_and_drain_together() {
        let port = free_port();
        let count = 3;
        let stop = Arc::new(AtomicBool::new(false));
        // Ready: the subscription's members own 3 partitions together.
        let ready = |_: u32, assigned: &[usize]| assigned.iter().sum::<usize>() == 3;
        let mut coordinator = TcpGate::new(settings(0, count, port, 10_000), None).unwrap();
        let members: Vec<_> = (1..count)
            .map(|index| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut gate =
                        TcpGate::new(settings(index, count, port, 10_000), None).unwrap();
                    // Shard 2's consumer gets its partition only after a while.
                    let born = Instant::now();
                    let mut local = move || {
                        let late = index == 2 && born.elapsed() < Duration::from_millis(500);
                        assignments(usize::from(!late))
                    };
                    let start = gate.start(&mut local, &|_, _| true, &stop).unwrap();
                    let waited = born.elapsed();
                    // Drained once every shard is done and has received what all acknowledged.
                    // Shard 1's consumers receive 15, then 25 after 300 ms; shard 2's none.
                    let draining = Instant::now();
                    let mut drained = false;
                    for _ in 0..200 {
                        let received = match index {
                            1 if draining.elapsed() < Duration::from_millis(300) => 15,
                            1 => 25,
                            _ => 0,
                        };
                        drained = gate.drained(true, &[10], &[received]);
                        if drained {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    gate.finish();
                    (start, waited, gate.clock(), drained)
                })
            })
            .collect();
        let start = coordinator
            .start(&mut || assignments(1), &ready, &stop)
            .unwrap();
        // 30 expected over the shards; 5 + 15 + 0 received, then 5 + 25 + 0.
        let draining = Instant::now();
        let mut drained = false;
        for _ in 0..300 {
            drained = coordinator.drained(true, &[10], &[5]);
            if drained {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(drained);
        assert!(
            draining.elapsed() >= Duration::from_millis(250),
            "drained before shard 1 had received what shard 2's producers sent"
        );
        coordinator.finish();
        for member in members {
            let (member_start, waited, clock, member_drained) = member.join().unwrap();
            assert!(
                waited >= Duration::from_millis(500),
                "started before shard 2 was ready"
            );
            // One machine, one clock: the offset is within the round trip, and the starts agree.
            assert!(clock.offset_ns.unsigned_abs() <= clock.round_trip_ns.max(1_000_000));
            assert!(
                member_start.abs_diff(start) < 2_000_000,
                "{member_start} vs {start}"
            );
            assert!(member_drained);
        }
        assert!(coordinator.lost().is_empty());
    }

    #[test]
    fn a_shard_that_never_comes_is_named_and_the_others_are_told() {
        let port = free_port();
        let stop = Arc::new(AtomicBool::new(false));
        let mut coordinator = TcpGate::new(settings(0, 3, port, 800), None).unwrap();
        let member = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut gate = TcpGate::new(settings(1, 3, port, 800), None).unwrap();
                gate.start(&mut || assignments(1), &|_, _| true, &stop)
            })
        };
        let began = Instant::now();
        let error = coordinator
            .start(&mut || assignments(1), &|_, _| true, &stop)
            .unwrap_err();
        assert!(began.elapsed() < Duration::from_secs(3));
        assert!(error.starts_with("shard 2 of 3 never arrived"), "{error}");
        let told = member.join().unwrap().unwrap_err();
        assert_eq!(told, error, "the member hears why from shard 0");
    }

    #[test]
    fn a_shard_of_another_workload_or_run_is_refused() {
        let port = free_port();
        let stop = Arc::new(AtomicBool::new(false));
        let mut coordinator = TcpGate::new(settings(0, 2, port, 5_000), None).unwrap();
        let member = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut other = settings(1, 2, port, 5_000);
                other.identity = "different".into();
                TcpGate::new(other, None).unwrap().start(
                    &mut || assignments(1),
                    &|_, _| true,
                    &stop,
                )
            })
        };
        let error = coordinator
            .start(&mut || assignments(1), &|_, _| true, &stop)
            .unwrap_err();
        assert!(error.contains("another workload"), "{error}");
        assert!(member
            .join()
            .unwrap()
            .unwrap_err()
            .contains("another workload"));
    }

    #[test]
    fn a_member_without_a_coordinator_gives_up_naming_the_address() {
        let port = free_port();
        let stop = AtomicBool::new(false);
        let mut gate = TcpGate::new(settings(1, 2, port, 300), None).unwrap();
        let error = gate
            .start(&mut || assignments(1), &|_, _| true, &stop)
            .unwrap_err();
        assert!(
            error.contains(&format!("127.0.0.1:{port}")) && error.contains("could not reach"),
            "{error}"
        );
    }
}
