//! report.html: one self-contained file per run, study or comparison. The page carries its
//! data as JSON and the chart code (uPlot, vendored and pinned, with its licence) inline, so it
//! opens from `file://` with no network. Reports read results folders only, never the engine,
//! so they can be built for old results too.

mod broker_metrics;
mod chart;
mod comparison;
mod data;
mod events;
mod faults;
mod headline;
mod integrity;
mod json_text;
mod nodes;
pub use data::read_hlog;
mod resources;
mod run;
mod run_charts;
mod run_folder;
mod run_heading;
mod run_notes;
mod shards;
mod study;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

pub use data::MAX_POINTS;

/// File name of the report inside a results or study folder.
pub const REPORT_FILE: &str = "report.html";

const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("../../assets/uplot/LICENSE");
const REPORT_JS: &str = include_str!("../../assets/report.js");
const REPORT_CSS: &str = include_str!("../../assets/report.css");
/// The vendored chart library's version.
pub const UPLOT_VERSION: &str = "1.6.32";

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error(transparent)]
    Labels(crate::labels::LabelError),
}

impl HtmlError {
    pub(crate) fn input(path: &Path, message: impl Into<String>) -> Self {
        HtmlError::Input {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// The report for one folder: a study folder (it has study.json) or a run folder.
pub fn folder_report(dir: &Path) -> Result<String, HtmlError> {
    report_of(dir, Written::Final)
}

/// When a report is built: for report.html, where a run without an end was interrupted or
/// killed, or for the live dashboard, where it is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Final,
    Live,
}

pub(crate) fn report_of(dir: &Path, written: Written) -> Result<String, HtmlError> {
    if dir.join("study.json").exists() {
        study::study_report(dir, written)
    } else {
        run::run_report(dir, written)
    }
}

/// A comparison of several run folders: spectra and time series overlaid, and a table of
/// headline numbers with ratios to the first. `labels` name the runs, one per folder in
/// order; when empty, each run is named by what sets it apart ([`crate::comparison_labels`]).
pub fn comparison_report(dirs: &[PathBuf], labels: &[String]) -> Result<String, HtmlError> {
    comparison::comparison_report(dirs, labels)
}

/// Builds the report of a folder and writes it there as report.html (atomically).
pub fn write_folder_report(dir: &Path) -> Result<PathBuf, HtmlError> {
    let html = folder_report(dir)?;
    let path = dir.join(REPORT_FILE);
    crate::folder::write_atomically(&path, html.as_bytes())
        .map_err(|e| HtmlError::input(&path, e.to_string()))?;
    Ok(path)
}

/// HTML-escapes text.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A chart placeholder; the script draws the chart with the same id from the data.
pub(crate) fn chart_div(id: &str, title: &str, note: &str) -> String {
    let mut s = format!(
        "<div class=\"chart\" id=\"chart-{}\" data-title=\"{}\"><h3>{}</h3>",
        esc(id),
        esc(title),
        esc(title)
    );
    if !note.is_empty() {
        let _ = write!(s, "<p class=\"legend-note\">{}</p>", esc(note));
    }
    s.push_str("</div>");
    s
}

/// The whole page: the body's HTML, the charts' data, the script.
pub(crate) fn page(title: &str, body: &str, charts: Vec<Json>, phases: Json) -> String {
    let data = json!({ "charts": charts, "phases": phases });
    // `</` inside a script element would end it: escape the slash.
    let data = data.to_string().replace("</", "<\\/");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"generator\" content=\"brokerbench {version}\">\
<title>{title}</title>\n<style>{uplot_css}\n{css}</style></head>\n<body data-status=\"loading\">\
<main>\n{body}\n<footer class=\"legend-note\">Written by brokerbench {version}. Charts drawn with uPlot {uplot} (MIT licence, included in this file). \
Drag on a chart to zoom, double-click to reset.</footer>\n</main>\n\
<script type=\"application/json\" id=\"report-data\">{data}</script>\n\
<script>/*! uPlot {uplot} | MIT licence:\n{license}*/\n{uplot_js}</script>\n<script>{js}</script>\n</body></html>\n",
        version = env!("CARGO_PKG_VERSION"),
        title = esc(title),
        uplot_css = UPLOT_CSS,
        css = REPORT_CSS,
        body = body,
        uplot = UPLOT_VERSION,
        license = UPLOT_LICENSE.replace("*/", "* /"),
        uplot_js = UPLOT_JS,
        js = REPORT_JS,
        data = data,
    )
}
