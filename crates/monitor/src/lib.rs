//! Resource monitoring of a benchmark run from `/proc` (Linux): CPU, memory, storage I/O and
//! threads of the broker and the client, and CPU, load, memory, disk and network of the host.
//!
//! [`Sampler`] reads everything on demand; [`Monitor`] samples on a timer in a background
//! thread; [`summarize`] aggregates a measurement window into the model's
//! [`ResourceSummary`](brokerbench_model::resources::ResourceSummary); [`ResourcesCsv`] writes
//! resources.csv. Nothing here fails a run: what cannot be read is `None`, and a monitored
//! process that disappears is reported as lost.

pub mod csv;
pub mod host;
pub mod monitor;
pub mod process;
mod procfs;
pub mod sampler;
pub mod source;
mod table;

pub use csv::{ResourcesCsv, RESOURCES_COLUMNS};
pub use host::{DeviceIo, HostCpu, HostSample, InterfaceIo};
pub use monitor::{summarize, Monitor, Recording};
pub use process::{find_pids_by_name, ProcessSample, Role, Target};
pub use procfs::{CpuTimes, DiskCounters, InterfaceCounters, ProcIo, ProcStat};
pub use sampler::{system_clock_ns, Sample, Sampler};
pub use source::{ProcFiles, ProcSource};

/// Why monitoring could not start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// Two targets share a role; resources.csv has one set of columns per role.
    #[error("more than one {0} process to monitor; give one {0} pid")]
    DuplicateRole(&'static str),
    /// A zero sampling interval would spin.
    #[error("resource sampling interval must be greater than 0 (for example 1s)")]
    ZeroInterval,
    /// The monitor thread could not be started.
    #[error("starting the resource monitor thread")]
    Spawn(#[source] std::io::Error),
}
