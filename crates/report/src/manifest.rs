//! manifest.json: what was run, where, with which tool and configuration, and how it ended.
//! Written when the results folder is created (status `interrupted`, so a killed process
//! leaves an honest folder) and rewritten when the run ends.

use std::fs;

use brokerbench_model::redact::{redact_json, redact_uri};
use brokerbench_model::RunStatus;
use serde::{Deserialize, Serialize};

use crate::time::{rfc3339_utc, UtcTime};

/// Name of the tool as written in every manifest.
pub const TOOL_NAME: &str = "brokerbench";

/// What the manifest says about clocks, because end-to-end latency subtracts a timestamp taken
/// by the producer from one taken by the consumer.
pub const CLOCK_NOTE: &str = "timestamps are ns since the UNIX epoch from this host's clock; compare end-to-end latency across hosts only with synchronized clocks";

/// The program that produced the results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `brokerbench`.
    pub name: String,
    /// Version of brokerbench (e.g. `0.1.0`), so results can be tied to the code that made them.
    pub version: String,
}

impl Tool {
    /// brokerbench at the given version.
    pub fn brokerbench(version: &str) -> Self {
        Tool {
            name: TOOL_NAME.to_string(),
            version: version.to_string(),
        }
    }
}

/// The machine the client ran on; numbers from different machines are not comparable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// Host name (`/proc/sys/kernel/hostname`), `unknown` when unreadable.
    pub hostname: String,
    /// Kernel release (`/proc/sys/kernel/osrelease`), `unknown` when unreadable.
    pub kernel: String,
    /// CPUs this process may run on (affinity and cgroup limits applied), count.
    pub cpus: usize,
    /// Total physical memory (`MemTotal` of `/proc/meminfo`), bytes; None when unreadable.
    pub memory_bytes: Option<u64>,
    /// How timestamps were taken and when end-to-end latency across hosts can be trusted.
    pub clock_note: String,
}

impl Host {
    /// Reads the host description from /proc; fields that cannot be read say so instead of
    /// failing the run.
    pub fn detect() -> Self {
        let read_trimmed = |path: &str| {
            fs::read_to_string(path)
                .ok()
                .map(|text| text.trim().to_string())
                .filter(|text| !text.is_empty())
        };
        Host {
            hostname: read_trimmed("/proc/sys/kernel/hostname")
                .or_else(|| std::env::var("HOSTNAME").ok())
                .unwrap_or_else(|| "unknown".to_string()),
            kernel: read_trimmed("/proc/sys/kernel/osrelease")
                .unwrap_or_else(|| "unknown".to_string()),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|text| mem_total_bytes(&text)),
            clock_note: CLOCK_NOTE.to_string(),
        }
    }
}

/// `MemTotal:       16314652 kB` → bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(value * 1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The broker the run talked to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    /// Address the client connected to (e.g. `127.0.0.1:9092`), credentials removed.
    pub address: String,
    /// Version the broker reported, when it reports one.
    pub version: Option<String>,
    /// True when brokerbench started this broker itself (a managed local broker).
    pub managed: bool,
    /// Client addresses of every node of a managed broker of several nodes, node 1 first;
    /// empty for one node or a broker brokerbench does not manage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Server settings a managed broker was started with (`broker up NAME --config
    /// KEY=VALUE`), on every node; empty for the family's defaults.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
}

/// Contents of manifest.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Which program (and version) wrote these results.
    pub tool: Tool,
    /// Identifier of this run, unique among runs (also used in topic names and folder names).
    pub run_id: String,
    /// Command-line arguments of the run, credentials already redacted by the caller.
    pub command: Vec<String>,
    /// The validated workload, as JSON.
    pub workload: serde_json::Value,
    /// The resolved driver configuration (`DriverConfig::redacted()`), as JSON.
    pub driver: serde_json::Value,
    /// Where the workload came from: a file path or a bundled workload name.
    pub workload_source: String,
    /// Where the driver configuration came from: a file path, or `defaults`.
    pub driver_source: String,
    /// What brokerbench chose in reading the workload and driver files, as printed with
    /// `note:` before the run: an OpenMessaging Benchmark file's translation (properties
    /// renamed, left out, or clamped to the client library's range) and defaults it filled in.
    #[serde(default)]
    pub input_notes: Vec<String>,
    /// The client machine.
    pub host: Host,
    /// The broker, when known.
    pub broker: Option<BrokerInfo>,
    /// Start of the run, RFC 3339 UTC (derived from `started_at_ns`).
    pub started_at: String,
    /// Start of the run, ns since the UNIX epoch (the same clock as every other timestamp).
    pub started_at_ns: u64,
    /// End of the run, RFC 3339 UTC; null while the run goes on or when it was killed.
    pub ended_at: Option<String>,
    /// End of the run, ns since the UNIX epoch; null while the run goes on or when it was killed.
    pub ended_at_ns: Option<u64>,
    /// `complete`, `interrupted` (also while running, so a killed run reads as interrupted) or
    /// `failed`.
    pub status: RunStatus,
    /// Why the run failed (already redacted); null otherwise.
    pub error: Option<String>,
}

impl Manifest {
    /// A manifest for a run starting now: this host, no broker yet, empty workload and
    /// driver; the caller fills in the remaining public fields before creating the folder.
    pub fn new(tool_version: &str, run_id: impl Into<String>, started_at_ns: u64) -> Self {
        Manifest {
            tool: Tool::brokerbench(tool_version),
            run_id: run_id.into(),
            command: Vec::new(),
            workload: serde_json::Value::Null,
            driver: serde_json::Value::Null,
            workload_source: String::new(),
            driver_source: String::new(),
            input_notes: Vec::new(),
            host: Host::detect(),
            broker: None,
            started_at: rfc3339_utc(started_at_ns),
            started_at_ns,
            ended_at: None,
            ended_at_ns: None,
            status: RunStatus::Interrupted,
            error: None,
        }
    }

    /// Makes the manifest safe and consistent to write at the start of a run: secrets
    /// removed from workload and driver (again: defence in depth), start time text derived
    /// from the ns value, status `interrupted` until the run ends.
    pub(crate) fn prepare_for_start(&mut self) {
        redact_json(&mut self.workload);
        redact_json(&mut self.driver);
        for note in &mut self.input_notes {
            *note = redact_uri(note);
        }
        self.started_at = rfc3339_utc(self.started_at_ns);
        self.ended_at = None;
        self.ended_at_ns = None;
        self.status = RunStatus::Interrupted;
        self.error = None;
    }

    /// Records how and when the run ended.
    pub(crate) fn end(&mut self, status: RunStatus, ended_at_ns: u64, error: Option<String>) {
        self.status = status;
        self.ended_at = Some(rfc3339_utc(ended_at_ns));
        self.ended_at_ns = Some(ended_at_ns);
        self.error = error;
    }
}

/// Folder name for a run: UTC start time and workload name, e.g. `20261122-031914-quickstart`.
/// Characters other than letters, digits, `.`, `_` and `-` in the workload name become `-`, so
/// the name is safe on every filesystem and in a shell.
pub fn folder_name(started_at_ns: u64, workload: &str) -> String {
    let t = UtcTime::from_nanos(started_at_ns);
    let workload: String = workload
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let workload = workload.trim_matches(|c| c == '-' || c == '.');
    let stamp = format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    );
    if workload.is_empty() {
        stamp
    } else {
        format!("{stamp}-{workload}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names() {
        let ns = 1_795_317_554 * 1_000_000_000 + 999_000_000;
        assert_eq!(folder_name(ns, "quickstart"), "20261122-031914-quickstart");
        assert_eq!(
            folder_name(ns, "my workload/v2"),
            "20261122-031914-my-workload-v2"
        );
        assert_eq!(folder_name(ns, "../.."), "20261122-031914");
    }

    #[test]
    fn meminfo() {
        let text = "MemTotal:       16314652 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total_bytes(text), Some(16_314_652 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn host_is_detected() {
        let host = Host::detect();
        assert!(host.cpus >= 1);
        assert!(!host.hostname.is_empty());
        assert_eq!(host.clock_note, CLOCK_NOTE);
    }

    #[test]
    fn secrets_are_removed_before_writing() {
        let mut manifest = Manifest::new("0.1.0", "r1", 0);
        manifest.driver = serde_json::json!({"producer_config": {"sasl.password": "hunter2"}});
        manifest.workload = serde_json::json!({"uri": "amqp://u:hunter2@host/"});
        manifest.input_notes = vec!["natsHostUrl=nats://u:hunter2@host:4222: the server".into()];
        manifest.prepare_for_start();
        let text = serde_json::to_string(&manifest).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("\"status\":\"interrupted\""));
        assert!(text.contains("\"ended_at\":null"));
    }
}
