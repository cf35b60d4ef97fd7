//! A workload's fault schedule (`faults:`): what to do to which node of the broker, when in
//! the measurement window, and for how long — read, checked field by field, and what a run
//! says about each fault afterwards.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::field::{FieldError, Scalar};
use crate::units::parse_duration;

mod marks;
mod seconds;
pub use marks::FaultMarks;
pub use seconds::{IntegrityBySecond, SecondIntegrity};

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultAction {
    /// SIGKILL to the node's process; with `restart_after`, started again.
    Kill,
    /// A clean shutdown (SIGTERM, the node's own stop); with `restart_after`, started again.
    Stop,
    /// SIGSTOP for `for`, then SIGCONT.
    Pause,
    /// The node cut off from the other nodes while clients still reach it.
    Partition,
    /// The user's own command at `at`, and `undo` after `for`.
    Command,
}

impl FaultAction {
    pub fn name(self) -> &'static str {
        match self {
            FaultAction::Kill => "kill",
            FaultAction::Stop => "stop",
            FaultAction::Pause => "pause",
            FaultAction::Partition => "partition",
            FaultAction::Command => "command",
        }
    }

    /// Whether the action acts on a node of the managed broker (all but `command`).
    pub fn needs_node(self) -> bool {
        self != FaultAction::Command
    }
}

/// Which node a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultNode {
    /// Node `id` (1 to the cluster's size).
    Id(u32),
    /// Picked from the nodes with the workload's seed.
    Random,
    /// The node that leads the run's first topic (as the broker names it: a topic, a queue, a
    /// stream) when the fault is injected, as the broker's own metadata says.
    Leader,
}

/// As written: the id, `random` or `leader`.
impl Serialize for FaultNode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FaultNode::Id(id) => s.serialize_u32(*id),
            FaultNode::Random => s.serialize_str("random"),
            FaultNode::Leader => s.serialize_str("leader"),
        }
    }
}

/// One fault, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fault {
    /// From the start of the measurement window.
    #[serde(with = "crate::field::duration_text")]
    pub at: Duration,
    pub action: FaultAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<FaultNode>,
    /// How long a pause or command lasts before it is undone.
    #[serde(
        rename = "for",
        skip_serializing_if = "Option::is_none",
        with = "optional_duration"
    )]
    pub lasts: Option<Duration>,
    /// After a kill or stop: when to start the node again, from the injection.
    #[serde(skip_serializing_if = "Option::is_none", with = "optional_duration")]
    pub restart_after: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<String>,
}

mod optional_duration {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => crate::field::duration_text::serialize(d, s),
            None => s.serialize_none(),
        }
    }
}

/// A fault as written; unknown fields rejected.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub at: Option<Scalar>,
    pub action: Option<FaultAction>,
    pub node: Option<Scalar>,
    #[serde(rename = "for")]
    pub lasts: Option<Scalar>,
    pub restart_after: Option<Scalar>,
    pub run: Option<String>,
    pub undo: Option<String>,
}

/// Checks every fault against the measurement window `window`; errors name `faults[i].FIELD`.
pub fn check_faults(raw: &[RawFault], window: Duration) -> Result<Vec<Fault>, FieldError> {
    raw.iter()
        .enumerate()
        .map(|(i, fault)| check_fault(fault, window, &format!("faults[{i}]")))
        .collect()
}

fn check_fault(raw: &RawFault, window: Duration, at: &str) -> Result<Fault, FieldError> {
    let field = |name: &str| format!("{at}.{name}");
    let err = |name: &str, message: String| FieldError::new(&field(name), message);
    let Some(action) = raw.action else {
        return Err(err(
            "action",
            "is missing: kill, stop, pause, partition or command".into(),
        ));
    };
    let when = duration(&raw.at, &field("at"))?.ok_or_else(|| {
        err(
            "at",
            "is missing: when in the measurement window, e.g. 10s".into(),
        )
    })?;
    if when >= window {
        return Err(err(
            "at",
            format!("{when:?} is past the {window:?} measurement window: give an earlier time or a longer duration"),
        ));
    }
    let fault = Fault {
        at: when,
        action,
        node: node(&raw.node, &field("node"))?,
        lasts: duration(&raw.lasts, &field("for"))?,
        restart_after: duration(&raw.restart_after, &field("restart_after"))?,
        run: raw.run.clone(),
        undo: raw.undo.clone(),
    };
    check_combination(&fault, at)?;
    Ok(fault)
}

/// Which fields go with which action.
fn check_combination(fault: &Fault, at: &str) -> Result<(), FieldError> {
    let err = |name: &str, message: &str| Err(FieldError::new(&format!("{at}.{name}"), message));
    let action = fault.action;
    if action.needs_node() && fault.node.is_none() {
        return err("node", "is missing: a node id (1, 2, …) or random");
    }
    if !action.needs_node() && fault.node.is_some() {
        return err(
            "node",
            "does not go with action: command (the command says what it acts on)",
        );
    }
    match action {
        FaultAction::Kill | FaultAction::Stop if fault.lasts.is_some() => err(
            "for",
            "does not go with kill or stop: give restart_after to start the node again",
        ),
        FaultAction::Pause | FaultAction::Partition | FaultAction::Command
            if fault.lasts.is_none() =>
        {
            err(
                "for",
                "is missing: how long the fault lasts before it is undone, e.g. 5s",
            )
        }
        FaultAction::Pause | FaultAction::Partition | FaultAction::Command
            if fault.restart_after.is_some() =>
        {
            err(
                "restart_after",
                "goes with kill and stop only; a pause or command ends after `for`",
            )
        }
        FaultAction::Command if fault.run.as_deref().is_none_or(|r| r.trim().is_empty()) => err(
            "run",
            "is missing: the command to run, e.g. \"ssh kafka-2 sudo systemctl stop kafka\"",
        ),
        _ if action != FaultAction::Command && (fault.run.is_some() || fault.undo.is_some()) => {
            err("run", "run and undo go with action: command only")
        }
        _ => Ok(()),
    }
}

fn duration(value: &Option<Scalar>, field: &str) -> Result<Option<Duration>, FieldError> {
    value
        .as_ref()
        .map(|v| parse_duration(&v.text()).map_err(|m| FieldError::new(field, m)))
        .transpose()
}

fn node(value: &Option<Scalar>, field: &str) -> Result<Option<FaultNode>, FieldError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.text().as_str() {
        "random" => Ok(Some(FaultNode::Random)),
        "leader" => Ok(Some(FaultNode::Leader)),
        text => match text.parse::<u32>() {
            Ok(id) if id >= 1 => Ok(Some(FaultNode::Id(id))),
            _ => Err(FieldError::new(
                field,
                format!("'{text}': give a node id (1, 2, …), random or leader"),
            )),
        },
    }
}

/// Parses `--fault at=8s,action=kill,node=2` into a fault map as a workload file would hold it.
pub fn fault_from_flag(flag: &str) -> Result<serde_json::Value, String> {
    let mut map = serde_json::Map::new();
    for pair in flag.split(',').filter(|p| !p.trim().is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            format!("'{pair}' in --fault {flag}: write KEY=VALUE pairs separated by commas, e.g. at=10s,action=kill,node=2,restart_after=10s")
        })?;
        map.insert(
            key.trim().to_string(),
            crate::field::parse_scalar(value.trim()),
        );
    }
    Ok(serde_json::Value::Object(map))
}

/// What a run measured about one fault; times in seconds since the start of warm-up, like the
/// summary's outages and stalls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultReport {
    /// 1 for the first fault of the schedule.
    pub index: u32,
    pub action: String,
    /// The node it hit, and how it was chosen ("as given", "random among 3, seed 7", "leader
    /// of topic T at injection").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
    /// The node's process when it was hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The node that led the run's first topic, queue or stream when the fault was injected,
    /// and when the run's messages were in (before its topics were removed); None where the
    /// broker did not say (a broker brokerbench does not run, a node fault not injected).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub leader_before: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub leader_after: Option<u32>,
    /// The schedule's `at`, from the start of the measurement window.
    pub at_s: f64,
    pub injected_at_s: f64,
    /// When it was undone, or the node was started again and answered; None when it never was.
    pub ended_at_s: Option<f64>,
    /// The longest span from the injection on in which a producer had a message due and got
    /// no acknowledgement.
    pub unavailable_s: f64,
    /// From the injection until the acknowledged rate, over 5 s, was back within 5% of the
    /// target (or of the rate before) with schedule lag back to its earlier level each second;
    /// None: not by the end of the window.
    pub recovered_after_s: Option<f64>,
    /// Publish and end-to-end latency in the seconds before the fault, and from the injection
    /// until the run recovered (or the window ended; at least until the fault ended).
    pub before: FaultLatency,
    pub during: FaultLatency,
    /// The node's process after a restart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted_pid: Option<u32>,
    /// A command fault's output, in the results folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What went wrong injecting or undoing it, if anything.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub problems: Vec<String>,
}

impl FaultReport {
    /// "kill of node 2 (pid 4242)", "command", …
    pub fn describe(&self) -> String {
        let mut text = self.action.clone();
        if let Some(node) = self.node {
            text.push_str(&format!(" of node {node}"));
        }
        if let Some(pid) = self.pid {
            text.push_str(&format!(" (pid {pid})"));
        }
        text
    }

    /// How it ended: "started again", "undone", or "ended" (a command without undo).
    pub fn ending(&self) -> &'static str {
        match (self.action.as_str(), self.restarted_pid) {
            (_, Some(_)) => "started again",
            ("pause", _) => "resumed",
            ("command", _) => "undone",
            _ => "ended",
        }
    }
}

/// Latency over some seconds of a run, ms (None where nothing was measured), the sends that
/// failed in those seconds, and what the ledger found of the messages intended to be sent in
/// them (None: no consumers ran, so nothing was checked).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultLatency {
    pub seconds: f64,
    pub publish_p99_ms: Option<f64>,
    pub publish_max_ms: Option<f64>,
    pub end_to_end_p99_ms: Option<f64>,
    pub end_to_end_max_ms: Option<f64>,
    #[serde(default)]
    pub failed: u64,
    /// Acknowledged and never received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicated: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_order: Option<u64>,
}

#[cfg(test)]
mod tests;
