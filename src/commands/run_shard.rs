//! A run as one shard of several (`--shard I/N`): which shard it is, whether it has work, the
//! gate where it meets the others, and shard.json and ledger.json, what `brokerbench merge`
//! reads beside the ordinary files.

use brokerbench_engine::Clock;

use super::run_inputs::run_id;
use crate::cli::RunArgs;
use crate::BadInput;

/// shard.json: which shard a folder is, and what `brokerbench merge` needs beside the
/// ordinary files.
pub const SHARD_FILE: &str = "shard.json";
/// ledger.json: a shard's delivery ledger (acknowledged and received sequences, as bits).
pub const LEDGER_FILE: &str = "ledger.json";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShardFile {
    pub shard: u32,
    pub shards: u32,
    pub run_id: String,
    pub coordinator: String,
    /// This shard's clock against shard 0's.
    pub clock: crate::shards::ClockEstimate,
    pub host: String,
    /// Global producer ids this shard ran.
    pub producers: Vec<u32>,
    /// (topic, subscription, member) of each consumer this shard ran.
    pub consumers: Vec<[u32; 3]>,
    /// Start of warm-up, ns since the UNIX epoch on this shard's clock.
    pub started_ns: u64,
    /// The measurement window on this shard's clock.
    pub window_start_ns: Option<u64>,
    pub window_end_ns: Option<u64>,
    /// Shards that left before they finished (written by shard 0).
    #[serde(default)]
    pub lost_shards: Vec<u32>,
}

/// The shard this run is, from the flags and the environment; None for a whole run.
pub(super) struct ShardPlan {
    pub(super) shard: brokerbench_engine::shard::Shard,
    pub(super) run_id: String,
    pub(super) coordinator: String,
}

impl ShardPlan {
    /// shard.json once the shard has run: its clock, members and window.
    pub(super) fn finished_file(
        &self,
        gate: &crate::shards::TcpGate,
        outcome: &brokerbench_engine::RunOutcome,
        window: Option<std::ops::Range<u64>>,
        run_id: &str,
    ) -> ShardFile {
        let ledger = &outcome.ledger;
        ShardFile {
            clock: gate.clock(),
            producers: ledger.producers.iter().map(|p| p.id).collect(),
            consumers: ledger
                .consumers
                .iter()
                .map(|c| [c.topic, c.subscription, c.member])
                .collect(),
            started_ns: outcome.started_ns,
            window_start_ns: window.as_ref().map(|w| w.start),
            window_end_ns: window.as_ref().map(|w| w.end),
            lost_shards: gate.lost(),
            ..self.file(run_id)
        }
    }

    /// shard.json as known before the run.
    pub(super) fn file(&self, run_id: &str) -> ShardFile {
        ShardFile {
            shard: self.shard.index,
            shards: self.shard.count,
            run_id: run_id.to_string(),
            coordinator: self.coordinator.clone(),
            clock: Default::default(),
            host: brokerbench_report::Host::detect().hostname,
            producers: Vec::new(),
            consumers: Vec::new(),
            started_ns: 0,
            window_start_ns: None,
            window_end_ns: None,
            lost_shards: Vec::new(),
        }
    }
}

/// A shard with no producer and no consumer of the workload is a mistake in N.
pub(super) fn check_share(
    shard: brokerbench_engine::shard::Shard,
    workload: &brokerbench_model::Workload,
    subscriptions: u32,
) -> anyhow::Result<()> {
    let (producers, consumers) = shard.share(workload, subscriptions);
    if producers == 0 && consumers == 0 {
        let slots = brokerbench_engine::shard::consumer_slots(workload, subscriptions);
        let most = (workload.producer_count() as usize).max(slots);
        return Err(BadInput(format!(
            "--shard {shard}: this shard would have nothing to do: the workload has {} producer(s) and {slots} consumer(s), shared out one by one over {} shards; use at most {most} shard(s)",
            workload.producer_count(),
            shard.count,
        ))
        .into());
    }
    Ok(())
}

pub(super) fn resolve_sharding(
    args: &RunArgs,
    workload: &brokerbench_model::Workload,
    source: &str,
) -> anyhow::Result<Option<ShardPlan>> {
    use brokerbench_engine::shard::Shard;
    if let Some(id) = &args.run_id {
        let fine = !id.is_empty()
            && id.len() <= 40
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !fine {
            return Err(BadInput(format!(
                "--run-id '{id}': topic, queue and group names carry it, so give 1 to 40 letters, digits, '-' or '_'"
            ))
            .into());
        }
    }
    let shard = match (args.shard, args.shards) {
        (Some(shard), _) => shard,
        (None, None) => return Ok(None),
        (None, Some(count)) => {
            let (variable, value) = ["JOB_COMPLETION_INDEX", "BROKERBENCH_SHARD_INDEX"]
                .iter()
                .find_map(|v| std::env::var(v).ok().map(|value| (*v, value)))
                .ok_or_else(|| {
                    BadInput(format!(
                        "--shards {count}: which shard is this? Set JOB_COMPLETION_INDEX (a Kubernetes Indexed Job does) or BROKERBENCH_SHARD_INDEX, or give --shard I/{count}"
                    ))
                })?;
            Shard::parse(&format!("{}/{count}", value.trim()))
                .map_err(|e| BadInput(format!("--shards {count} with {variable}={value}: {e}")))?
        }
    };
    let Some(run_id) = args.run_id.clone() else {
        return Err(BadInput(format!(
            "--shard {shard}: give every shard the same --run-id (or BROKERBENCH_RUN_ID), e.g. --run-id {}, so that they use the same topics and groups",
            run_id(Clock::process().now_ns())
        ))
        .into());
    };
    let coordinator = match (&args.coordinator, shard.count) {
        (Some(c), _) => c.clone(),
        (None, 1) => "127.0.0.1:0".to_string(),
        (None, _) => {
            return Err(BadInput(format!(
                "--shard {shard}: give every shard --coordinator HOST:PORT (or BROKERBENCH_COORDINATOR), where shard 0 listens and the others reach it, e.g. --coordinator 127.0.0.1:7878"
            ))
            .into())
        }
    };
    if workload.backlog.is_some() {
        return Err(BadInput(format!(
            "{source}: field `backlog`: backlog mode pauses every consumer at once, which shards do not do yet; run it as one process (drop --shard)"
        ))
        .into());
    }
    Ok(Some(ShardPlan {
        shard,
        run_id,
        coordinator,
    }))
}

/// What the engine needs of a shard of a run: its place, and the gate where the shards meet.
pub(super) fn engine_sharding<'a>(
    sharding: Option<&ShardPlan>,
    gate: Option<&'a mut crate::shards::TcpGate>,
) -> Option<brokerbench_engine::Sharding<'a>> {
    match (sharding, gate) {
        (Some(s), Some(gate)) => Some(brokerbench_engine::Sharding {
            shard: s.shard,
            gate,
        }),
        _ => None,
    }
}

/// A shard meets the others at the start line through the coordinator.
pub(super) fn open_gate(
    sharding: Option<&ShardPlan>,
    args: &RunArgs,
    workload: &brokerbench_model::Workload,
    driver: &str,
) -> anyhow::Result<Option<crate::shards::TcpGate>> {
    let Some(s) = sharding else {
        return Ok(None);
    };
    let settings = crate::shards::GateSettings {
        shard: s.shard,
        run_id: s.run_id.clone(),
        coordinator: s.coordinator.clone(),
        timeout: args.shard_timeout,
        identity: crate::shards::identity(&serde_json::to_value(workload)?, driver),
    };
    Ok(Some(crate::shards::TcpGate::new(settings, None)?))
}
