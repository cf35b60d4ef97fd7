//! The run report: one results folder. This file puts the page together, section by section,
//! from what the folder holds.

use std::path::Path;

use super::broker_metrics::broker_metrics;
use super::chart::Page;
use super::headline::{headline, so_far};
use super::integrity::integrity;
use super::json_text::text;
use super::resources::resources;
use super::run_charts::{over_time, percentile_spectrum};
use super::run_folder::RunFolder;
use super::run_heading::{heading, meta};
use super::run_notes::{notes, notes_so_far, outages};
use super::shards::shards_table;
use super::HtmlError;

/// The report of one results folder.
pub(crate) fn run_report(dir: &Path, written: super::Written) -> Result<String, HtmlError> {
    let run = RunFolder::read(dir)?;
    let m = &run.manifest;
    let s = run.summary.as_ref();
    let workload = text(m, "workload.name");
    let driver = s
        .map(|s| text(s, "driver"))
        .unwrap_or_else(|| text(m, "driver.driver"));
    let mut page = Page::default();
    // Summed from the per-second logs until window.hlog is written: read once.
    let windows = run.window_histograms();
    heading(&mut page.body, m, s, &workload, &driver, written);
    meta(&mut page.body, m, s, &driver);
    if let Some(s) = s {
        headline(&mut page.body, s);
        outages(&mut page.body, s);
        super::faults::table(&mut page.body, s);
        notes(&mut page.body, s);
    } else if written == super::Written::Live {
        so_far(&mut page.body, &run, &windows);
        notes_so_far(&mut page.body, &run);
    }
    if let Some(table) = shards_table(dir) {
        page.body.push_str(&table);
    }
    over_time(&mut page, &run, s);
    resources(&mut page, &run);
    broker_metrics(&mut page, &run, s);
    percentile_spectrum(&mut page, &windows);
    if let Some(s) = s {
        integrity(&mut page.body, s);
    }
    Ok(super::page(
        &format!("brokerbench: {workload} on {driver}"),
        &page.body,
        page.charts,
        run.phases(),
    ))
}
