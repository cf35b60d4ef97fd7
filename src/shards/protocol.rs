//! What the shards of a run say to each other, one line of JSON per message, and what they
//! must agree on to meet: the run id, the workload's digest and the coordinator's clock.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use brokerbench_engine::shard::Shard;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(super) enum Message {
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

pub(super) fn send(stream: &mut TcpStream, message: &Message) -> std::io::Result<()> {
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
