//! Another shard's side of the gate: it reaches shard 0, says hello, measures its clock
//! against shard 0's, reports its consumers and its drain, and waits for shard 0's word.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use brokerbench_engine::shard::Assignments;
use brokerbench_engine::Clock;

use super::protocol::{send, ClockEstimate, GateSettings, Message};

/// Pings to estimate a shard's clock offset; the one with the shortest round trip counts.
const PINGS: usize = 16;
/// How often a shard repeats its state to the coordinator.
const REPORT_EVERY: Duration = Duration::from_millis(100);

pub struct Member {
    pub(super) settings: GateSettings,
    pub(super) stream: Option<TcpStream>,
    pub(super) inbox: Option<Receiver<Message>>,
    pub(super) clock: ClockEstimate,
    pub(super) drained: bool,
    pub(super) last_report: Option<Instant>,
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

    pub(super) fn start(
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

    pub(super) fn drained(
        &mut self,
        producers_done: bool,
        expected: &[u64],
        received: &[u64],
    ) -> bool {
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

    pub(super) fn finish(&mut self) {
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
