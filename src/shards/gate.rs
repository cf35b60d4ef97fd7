//! The gate of one shard, where the engine waits for the others: shard 0's coordinator or
//! another shard's member, chosen by the shard's index.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicBool;

use brokerbench_engine::shard::{Assignments, Gate};

use super::coordinator::Coordinator;
use super::member::Member;
use super::protocol::{ClockEstimate, GateSettings};

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

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use brokerbench_engine::shard::Shard;
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
