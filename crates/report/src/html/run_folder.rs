//! A results folder as the run report and the comparison read it: the manifest, the summary
//! when there is one, timeseries.csv's rows, the phases to shade and the window's histograms.

use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

use super::data::{fold_hlog, number_at, read_hlog, read_json, Columns};
use super::HtmlError;
use crate::export::SUMMARY_FILE;
use crate::folder::{
    E2E_HLOG_FILE, MANIFEST_FILE, PUBLISH_HLOG_FILE, TIMESERIES_FILE, WINDOW_HLOG_FILE,
};

/// Everything read from one results folder.
pub(super) struct RunFolder {
    pub(super) dir: PathBuf,
    pub(super) manifest: Json,
    pub(super) summary: Option<Json>,
    pub(super) timeseries: Option<Columns>,
    /// Run start, seconds since the UNIX epoch.
    pub(super) start_s: f64,
}

impl RunFolder {
    pub(super) fn read(dir: &Path) -> Result<RunFolder, HtmlError> {
        let manifest = read_json(&dir.join(MANIFEST_FILE)).ok_or_else(|| {
            HtmlError::input(
                dir,
                format!("no readable {MANIFEST_FILE}: not a brokerbench results folder"),
            )
        })?;
        let start_s = number_at(&manifest, "started_at_ns").unwrap_or(0.0) / 1e9;
        Ok(RunFolder {
            dir: dir.to_path_buf(),
            summary: read_json(&dir.join(SUMMARY_FILE)),
            timeseries: Columns::read(&dir.join(TIMESERIES_FILE)),
            manifest,
            start_s,
        })
    }

    /// Seconds since the run started, per timeseries row.
    pub(super) fn seconds(&self) -> Vec<f64> {
        self.timeseries
            .as_ref()
            .and_then(|t| t.get("second"))
            .map(|v| v.iter().map(|x| x.unwrap_or(0.0)).collect())
            .unwrap_or_default()
    }

    /// Whether the run had a target rate (not `max`): only then is a message due at a time,
    /// and a quiet second a stall.
    pub(super) fn scheduled(&self) -> bool {
        self.manifest["workload"]["rate"].is_number()
    }

    /// The timeseries rows of the measurement window, by index.
    pub(super) fn measured_rows(&self) -> Vec<usize> {
        let phases = self.timeseries.as_ref().and_then(|t| t.text.get("phase"));
        let phases = phases.map(Vec::as_slice).unwrap_or_default();
        (0..phases.len().min(self.seconds().len()))
            .filter(|&i| phases[i] == "measurement")
            .collect()
    }

    /// Warm-up, measurement and drain as [start, end) in seconds since the run start.
    pub(super) fn phases(&self) -> Json {
        let Some(t) = &self.timeseries else {
            return json!([]);
        };
        let seconds = self.seconds();
        let phases = t.text.get("phase").cloned().unwrap_or_default();
        let mut out: Vec<Json> = Vec::new();
        for (i, name) in phases.iter().enumerate() {
            let start = seconds[i];
            match out.last_mut() {
                Some(last) if last["name"] == name.as_str() => last["end"] = json!(start + 1.0),
                _ => out.push(json!({"name": name, "start": start, "end": start + 1.0})),
            }
        }
        // Outages (to the first acknowledgement after them, or the end) and stalls, shaded
        // over the phases; while the run goes, from its rows.
        let end = out.last().map_or(0.0, |p| p["end"].as_f64().unwrap_or(0.0));
        let summary = self.summary.as_ref();
        for o in summary
            .and_then(|s| s["outages"].as_array())
            .into_iter()
            .flatten()
        {
            let start = o["start_s"].as_f64().unwrap_or(0.0);
            let until = o["first_ack_s"].as_f64().unwrap_or(end);
            out.push(json!({"name": "outage", "start": start, "end": until}));
        }
        for stall in summary
            .and_then(|s| s["stalls"].as_array())
            .into_iter()
            .flatten()
        {
            let start = stall["start_s"].as_f64().unwrap_or(0.0);
            let seconds = stall["seconds"].as_f64().unwrap_or(0.0);
            out.push(json!({"name": "stall", "start": start, "end": start + seconds}));
        }
        for b in summary
            .and_then(|s| s["blocks"].as_array())
            .into_iter()
            .flatten()
        {
            let start = b["start_s"].as_f64().unwrap_or(0.0);
            let until = b["end_s"].as_f64().unwrap_or(end);
            out.push(json!({"name": "blocked", "start": start, "end": until}));
        }
        match summary {
            Some(_) => out.extend(super::faults::spans(summary, end)),
            None => {
                out.extend(super::events::spans_from_rows(
                    t,
                    &seconds,
                    self.scheduled(),
                ));
                let faults = t.text.get("faults").cloned().unwrap_or_default();
                out.extend(super::faults::spans_from_rows(&seconds, &faults));
            }
        }
        Json::Array(out)
    }

    /// The four whole-window histograms for spectra: from window.hlog, or (older folders)
    /// summed from the per-second logs' measurement seconds.
    pub(super) fn window_histograms(&self) -> Vec<(&'static str, hdrhistogram::Histogram<u64>)> {
        let names = [
            ("publish", "publish"),
            ("end_to_end", "end-to-end"),
            ("service_time", "service time"),
            ("schedule_lag", "schedule lag"),
        ];
        if let Some(entries) = read_hlog(&self.dir.join(WINDOW_HLOG_FILE)) {
            return names
                .iter()
                .filter_map(|(tag, label)| {
                    entries
                        .iter()
                        .find(|(t, _, _)| t == tag)
                        .map(|(_, _, h)| (*label, h.clone()))
                })
                .collect();
        }
        if self.timeseries.is_none() {
            return Vec::new();
        }
        let seconds = self.seconds();
        let measured: std::collections::HashSet<i64> = self
            .measured_rows()
            .iter()
            .map(|&i| seconds[i].round() as i64)
            .collect();
        let mut out = Vec::new();
        for (file, label) in [
            (PUBLISH_HLOG_FILE, "publish"),
            (E2E_HLOG_FILE, "end-to-end"),
        ] {
            let mut sum = brokerbench_model::new_histogram();
            let read = fold_hlog(&self.dir.join(file), |_, start, h| {
                if measured.contains(&(start.floor() as i64)) {
                    let _ = sum.add(&h);
                }
            });
            if read.is_some() {
                out.push((label, sum));
            }
        }
        out
    }
}
