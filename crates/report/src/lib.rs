//! Everything brokerbench writes about a run: the results folder (manifest.json, summary.json,
//! timeseries.csv, publish.hlog, e2e.hlog), written as the run goes so a crash leaves a usable
//! folder; the terminal summary; and the live status line.
//!
//! Reports know nothing about the engine: they read [`brokerbench_model::IntervalRow`]s through
//! [`brokerbench_model::RunObserver`] and the final [`brokerbench_model::Summary`].

mod dashboard;
mod error;
mod export;
mod folder;
mod hlog;
pub mod html;
mod labels;
mod live;
mod manifest;
mod omb;
mod tee;
mod terminal;
mod time;
mod timeseries;

pub use dashboard::Dashboard;
pub use error::ReportError;
pub use export::{Export, SummaryJson, SUMMARY_FILE};
pub use folder::{
    ResultsFolder, E2E_HLOG_FILE, MANIFEST_FILE, PUBLISH_HLOG_FILE, TIMESERIES_FILE,
    WINDOW_HLOG_FILE,
};
pub use hlog::HistogramLogWriter;
pub use labels::{
    check_given_labels, comparison_labels, generated_folder_name, LabelError, RunToName,
};
pub use live::LiveLine;
pub use manifest::{folder_name, BrokerInfo, Host, Manifest, Tool, CLOCK_NOTE, TOOL_NAME};
pub use omb::{OmbHeader, OmbResult, OMB_RESULT_FILE};
pub use tee::Tee;
pub use terminal::terminal_summary;
pub use time::rfc3339_utc;
pub use timeseries::{TimeseriesWriter, TIMESERIES_COLUMNS};

#[cfg(test)]
pub(crate) mod test_support;
