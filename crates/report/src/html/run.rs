//! The run report: one results folder.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use brokerbench_model::units::{format_nanos, format_rate};
use hdrhistogram::Histogram;
use serde_json::{json, Value as Json};

use super::data::{
    fold_hlog, json_series, json_xs, number_at, read_hlog, read_json, reduce, spectrum,
    spectrum_xs, Columns, Reduce,
};
use super::{chart_div, esc, HtmlError};
use crate::export::SUMMARY_FILE;
use crate::folder::{
    E2E_HLOG_FILE, MANIFEST_FILE, PUBLISH_HLOG_FILE, TIMESERIES_FILE, WINDOW_HLOG_FILE,
};

/// Headline numbers shown as cards: (summary.json path, label, unit).
pub(crate) const HEADLINE: &[(&str, &str, &str)] = &[
    (
        "throughput.acknowledged_per_s",
        "acknowledged msg/s",
        "rate",
    ),
    (
        "throughput.acknowledged_mb_per_s",
        "acknowledged MB/s",
        "plain",
    ),
    ("throughput.received_per_s", "received msg/s", "rate"),
    ("latency.publish.p50_ns", "publish p50", "ns"),
    ("latency.publish.p99_ns", "publish p99", "ns"),
    ("latency.publish.p999_ns", "publish p99.9", "ns"),
    ("latency.publish.max_ns", "publish max", "ns"),
    ("latency.end_to_end.p50_ns", "end-to-end p50", "ns"),
    ("latency.end_to_end.p99_ns", "end-to-end p99", "ns"),
    ("latency.end_to_end.max_ns", "end-to-end max", "ns"),
    ("integrity.lost", "lost", "plain"),
    ("integrity.duplicated", "duplicated", "plain"),
    ("total.failed", "failed sends", "plain"),
    (
        "client.cpu_s_per_million_messages",
        "client CPU-s per M msgs",
        "plain",
    ),
    ("client.peak_rss_bytes", "client peak RSS", "bytes"),
    (
        "resources.broker.cpu_user_pct_mean",
        "broker CPU usr %",
        "plain",
    ),
    (
        "resources.broker.cpu_system_pct_mean",
        "broker CPU sys %",
        "plain",
    ),
];

/// A headline value as text: the same formatting wherever it is shown.
pub(crate) fn show(value: f64, unit: &str) -> String {
    match unit {
        "ns" => format_nanos(value.max(0.0) as u64),
        "rate" => format_rate(value),
        "bytes" => format!("{:.1} MB", value / 1e6),
        _ if value.fract() == 0.0 => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    }
}

/// Whether a latency group was measured at all (its histogram had values).
pub(super) fn measured(summary: &Json, path: &str) -> bool {
    match path.strip_prefix("latency.") {
        Some(rest) => {
            let group = rest.split('.').next().unwrap_or_default();
            number_at(summary, &format!("latency.{group}.count")).is_some_and(|c| c > 0.0)
        }
        None => true,
    }
}

/// Everything read from one results folder.
pub(super) struct RunFolder {
    pub(super) dir: PathBuf,
    pub(super) manifest: Json,
    pub(super) summary: Option<Json>,
    pub(super) timeseries: Option<Columns>,
    /// Run start, seconds since the UNIX epoch.
    start_s: f64,
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
    fn scheduled(&self) -> bool {
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
    fn phases(&self) -> Json {
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

/// One time chart from timeseries columns.
pub(super) fn time_chart(
    id: &str,
    xs: &[f64],
    series: Vec<(&str, Vec<Option<f64>>, Reduce, u8)>,
    options: Json,
) -> Json {
    let (rx, rs) = reduce(
        xs,
        series.iter().map(|(_, v, r, _)| (v.clone(), *r)).collect(),
    );
    let mut spec = json!({
        "id": id,
        "x": "time",
        "xLabel": "seconds since start",
        "xs": json_xs(&rx),
        "series": series.iter().zip(rs).map(|((label, _, _, axis), values)| json!({
            "label": label, "values": json_series(&values), "axis": axis,
        })).collect::<Vec<_>>(),
    });
    if let (Json::Object(spec), Json::Object(extra)) = (&mut spec, options) {
        spec.extend(extra);
    }
    spec
}

/// A report page as it is built: its HTML body and the specs of its charts.
#[derive(Default)]
struct Page {
    body: String,
    charts: Vec<Json>,
}

impl Page {
    /// Adds a chart: its spec to the data, its placeholder to the page.
    fn add_chart(&mut self, spec: Json, title: &str, note: &str) {
        self.body.push_str(&chart_div(
            spec["id"].as_str().unwrap_or_default(),
            title,
            note,
        ));
        self.charts.push(spec);
    }
}

/// A value of a JSON document by dotted path, as text ("—" when absent).
fn text(doc: &Json, path: &str) -> String {
    path.split('.')
        .try_fold(doc, |n, p| n.get(p))
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_else(|| "—".into())
}

/// The strings of a JSON array (none when it is no array).
fn strings(value: &Json) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

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

/// The title, the run's id and status, and the banner that says whether it is clean.
fn heading(
    body: &mut String,
    m: &Json,
    s: Option<&Json>,
    workload: &str,
    driver: &str,
    written: super::Written,
) {
    let mut status = text(m, "status");
    // A run's manifest says interrupted until its end is written; on the live page the
    // run is going.
    let live = written == super::Written::Live && status == "interrupted" && s.is_none();
    if live {
        status = "running".into();
    }
    let _ = write!(
        body,
        "<h1>{} on {}</h1><p class=\"sub\">run {} · {} · status <b>{}</b></p>",
        esc(workload),
        esc(driver),
        esc(&text(m, "run_id")),
        esc(&text(m, "started_at")),
        esc(&status)
    );
    match (status.as_str(), s) {
        ("running", None) => {}
        ("complete", Some(s)) => {
            let clean = s["errors"].as_object().is_none_or(|e| e.is_empty())
                && ["lost", "duplicated", "out_of_order", "unacknowledged"]
                    .iter()
                    .all(|k| number_at(s, &format!("integrity.{k}")).unwrap_or(0.0) == 0.0);
            if clean {
                body.push_str("<div class=\"banner good\">Complete and clean: no failures, nothing lost, duplicated, out of order or unacknowledged.</div>");
            } else {
                body.push_str("<div class=\"banner bad\">Complete, NOT clean: see the notes, errors and integrity table below.</div>");
            }
        }
        ("interrupted", _) => body.push_str("<div class=\"banner warn\">INTERRUPTED: the run was stopped (or killed) before its planned end; what was written until then is shown.</div>"),
        _ => {
            let error = m.get("error").and_then(Json::as_str).unwrap_or("no summary was written");
            let _ = write!(body, "<div class=\"banner bad\">FAILED: {}</div>", esc(error));
        }
    }
}

/// The broker as the manifest names it: version, address, whether brokerbench manages it.
fn broker_text(m: &Json, driver: &str) -> String {
    let broker = m.get("broker").filter(|b| !b.is_null());
    broker.map_or("—".to_string(), |b| {
        format!(
            "{} {} at {}{}",
            driver,
            b.get("version")
                .and_then(Json::as_str)
                .unwrap_or("(version unknown)"),
            b.get("address").and_then(Json::as_str).unwrap_or("?"),
            match (
                b.get("managed").and_then(Json::as_bool),
                b.get("nodes").and_then(Json::as_array).map(Vec::len),
            ) {
                (Some(true), Some(nodes)) if nodes > 1 =>
                    format!(" (a cluster of {nodes} nodes managed by brokerbench)"),
                (Some(true), _) => " (managed by brokerbench)".to_string(),
                _ => String::new(),
            } + &settings_text(b)
        )
    })
}

/// `; server settings: k=v, …` when the managed broker was started with some.
fn settings_text(broker: &Json) -> String {
    let Some(settings) = broker.get("settings").and_then(Json::as_object) else {
        return String::new();
    };
    let pairs: Vec<String> = settings
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    match pairs.is_empty() {
        true => String::new(),
        false => format!("; server settings: {}", pairs.join(", ")),
    }
}

/// The host as the manifest describes it.
fn host_text(m: &Json) -> String {
    format!(
        "{} · {} CPUs · {} · kernel {}",
        text(m, "host.hostname"),
        text(m, "host.cpus"),
        number_at(m, "host.memory_bytes")
            .map(|b| format!("{:.1} GiB", b / (1u64 << 30) as f64))
            .unwrap_or_else(|| "memory unknown".into()),
        text(m, "host.kernel")
    )
}

/// The run's mode: its target rate or max rate, and the window's length.
fn mode_text(s: Option<&Json>) -> String {
    s.map(|s| {
        let target = number_at(s, "target_rate")
            .map_or("max rate (closed loop)".to_string(), |r| {
                format!("open loop at {} msg/s", format_rate(r))
            });
        format!(
            "{target}, measurement {:.1} s",
            number_at(s, "measurement_s").unwrap_or(0.0)
        )
    })
    .unwrap_or_else(|| "—".into())
}

/// What ran where, when and how, and the configuration as run.
fn meta(body: &mut String, m: &Json, s: Option<&Json>, driver: &str) {
    let _ = write!(
        body,
        "<dl class=\"meta\"><dt>workload</dt><dd>{}</dd><dt>driver</dt><dd>{}</dd><dt>broker</dt><dd>{}</dd><dt>host</dt><dd>{}</dd>\
<dt>started</dt><dd>{}</dd><dt>ended</dt><dd>{}</dd><dt>mode</dt><dd>{}</dd><dt>command</dt><dd><code>{}</code></dd></dl>",
        esc(&text(m, "workload_source")),
        esc(&text(m, "driver_source")),
        esc(&broker_text(m, driver)),
        esc(&host_text(m)),
        esc(&text(m, "started_at")),
        esc(&text(m, "ended_at")),
        esc(&mode_text(s)),
        esc(&strings(&m["command"]).join(" "))
    );
    let _ = write!(
        body,
        "<details><summary>Configuration as run (credentials redacted)</summary><pre>workload: {}\n\ndriver: {}</pre></details>",
        esc(&serde_json::to_string_pretty(&m["workload"]).unwrap_or_default()),
        esc(&serde_json::to_string_pretty(&m["driver"]).unwrap_or_default())
    );
}

/// The headline cards, and the backlog mode's line.
fn headline(body: &mut String, s: &Json) {
    body.push_str(
        "<h2>Headline numbers <small>(measurement window)</small></h2><div class=\"cards\">",
    );
    for (path, label, unit) in HEADLINE {
        let Some(v) = number_at(s, path).filter(|_| measured(s, path)) else {
            continue;
        };
        let _ = write!(
            body,
            "<div class=\"card\" data-key=\"{path}\" data-value=\"{v}\"><div class=\"label\">{}</div><div class=\"value\">{}</div></div>",
            esc(label),
            esc(&show(v, unit))
        );
    }
    body.push_str("</div>");
    if let Ok(backlog) =
        serde_json::from_value::<brokerbench_model::BacklogReport>(s["backlog"].clone())
    {
        let _ = write!(
            body,
            "<p class=\"backlog\"><b>Backlog mode</b>: {}.</p>",
            esc(&crate::terminal::backlog_text(&backlog))
        );
    }
}

/// A live run's numbers over its measurement window so far, from the rows and the per-second
/// histograms written until now: the headline cards the summary will replace.
fn so_far(body: &mut String, run: &RunFolder, windows: &[(&str, Histogram<u64>)]) {
    let Some(t) = &run.timeseries else {
        return;
    };
    let measured = run.measured_rows();
    if measured.is_empty() {
        body.push_str("<p class=\"legend-note\">The headline numbers appear once the measurement window has begun.</p>");
        return;
    }
    let mean = |column: &str| {
        let values = t.get(column)?;
        let known: Vec<f64> = measured
            .iter()
            .filter_map(|&i| values.get(i).copied().flatten())
            .collect();
        (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64)
    };
    let mut cards: Vec<(&str, f64, &str)> = Vec::new();
    for (column, label) in [
        ("acknowledged", "acknowledged msg/s"),
        ("received", "received msg/s"),
    ] {
        if let Some(v) = mean(column) {
            cards.push((label, v, "rate"));
        }
    }
    for (name, h) in windows {
        if matches!(*name, "publish" | "end-to-end") && !h.is_empty() {
            cards.push((name, h.value_at_quantile(0.5) as f64, "p50"));
            cards.push((name, h.value_at_quantile(0.99) as f64, "p99"));
        }
    }
    let _ = write!(
        body,
        "<h2>Headline numbers <small>(the first {} s of the measurement window)</small></h2><div class=\"cards\">",
        measured.len()
    );
    for (label, value, kind) in cards {
        let (label, unit) = match kind {
            "rate" => (label.to_string(), "rate"),
            p => (format!("{label} {p}"), "ns"),
        };
        let _ = write!(
            body,
            "<div class=\"card so-far\" data-value=\"{value}\"><div class=\"label\">{}</div><div class=\"value\">{}</div></div>",
            esc(&label),
            esc(&show(value, unit))
        );
    }
    body.push_str("</div>");
}

/// The outages table, when the broker went away.
fn outages(body: &mut String, s: &Json) {
    let Ok(outages) =
        serde_json::from_value::<Vec<brokerbench_model::Outage>>(s["outages"].clone())
    else {
        return;
    };
    if outages.is_empty() {
        return;
    }
    body.push_str("<h2>Outages</h2><table class=\"outages\"><thead><tr><th>lost at</th><th>first acknowledgement after</th><th>producers</th><th>messages failed</th></tr></thead><tbody>");
    for o in &outages {
        let after = o
            .duration_s()
            .map_or("none before the run ended".to_string(), |d| {
                format!("{d:.1} s later")
            });
        let _ = write!(
            body,
            "<tr><td>{:.1} s</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            o.start_s,
            esc(&after),
            o.producers,
            o.failed
        );
    }
    body.push_str("</tbody></table><p class=\"legend-note\">Seconds into the run (from the start of warm-up), as the producers' clients saw it: from the first finding the broker gone to the last getting an acknowledgement again.</p>");
}

/// While the run goes: its outages, blocks and stalls so far, and the messages that failed.
fn notes_so_far(body: &mut String, run: &RunFolder) {
    let Some(t) = &run.timeseries else {
        return;
    };
    let notes = super::events::notes_so_far(t, &run.seconds(), run.scheduled());
    if notes.is_empty() {
        return;
    }
    body.push_str("<h2>Notes <small>(so far, to whole seconds; the summary's come at the end)</small></h2><ul class=\"notes so-far\">");
    for n in &notes {
        let _ = write!(body, "<li>{}</li>", esc(n));
    }
    body.push_str("</ul>");
}

/// Notes and errors, where they cannot be missed.
fn notes(body: &mut String, s: &Json) {
    let notes = strings(&s["notes"]);
    let errors: Vec<(String, f64)> = s["errors"]
        .as_object()
        .map(|e| {
            e.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                .collect()
        })
        .unwrap_or_default();
    if notes.is_empty() && errors.is_empty() {
        return;
    }
    body.push_str("<h2>Notes</h2><ul class=\"notes\">");
    for (kind, n) in &errors {
        let _ = write!(
            body,
            "<li><b>{} failures of kind <code>{}</code></b></li>",
            n,
            esc(kind)
        );
    }
    for n in &notes {
        let _ = write!(body, "<li>{}</li>", esc(n));
    }
    body.push_str("</ul>");
}

/// Rates, latency, backlog and schedule lag per second (timeseries.csv).
fn over_time(page: &mut Page, run: &RunFolder, s: Option<&Json>) {
    let Some(t) = run.timeseries.as_ref().filter(|t| t.rows > 0) else {
        return;
    };
    let xs = run.seconds();
    page.body.push_str("<h2>Over time</h2><p class=\"legend-note\">Warm-up is shaded yellow, the drain blue; the summary covers the unshaded measurement window. Outages (from the loss to the first acknowledgement after it) are shaded red, stalls orange, publishing blocked by the broker purple, faults grey from their injection to their end (marked with their number).</p>");
    let col = |name: &str| t.get(name).cloned().unwrap_or_default();
    let mut rates = vec![
        ("sent", col("sent"), Reduce::Mean, 0),
        ("acknowledged", col("acknowledged"), Reduce::Mean, 0),
        ("received", col("received"), Reduce::Mean, 0),
        ("failed", col("failed"), Reduce::Mean, 0),
    ];
    if let Some(target) = s.and_then(|s| number_at(s, "target_rate")) {
        rates.push(("target", vec![Some(target); xs.len()], Reduce::Mean, 0));
    }
    page.add_chart(
        time_chart(
            "rates",
            &xs,
            rates,
            json!({"yLabel": "msg/s", "unitY": "count"}),
        ),
        "Messages per second",
        "sent, acknowledged and received in each second, against the target rate",
    );
    let us = |name: &str| t.scaled(name, 1e3).unwrap_or_default();
    page.add_chart(time_chart(
        "latency",
        &xs,
        vec![
            ("publish p50", us("publish_p50_us"), Reduce::Max, 0),
            ("publish p99", us("publish_p99_us"), Reduce::Max, 0),
            ("publish max", us("publish_max_us"), Reduce::Max, 0),
            ("end-to-end p50", us("e2e_p50_us"), Reduce::Max, 0),
            ("end-to-end p99", us("e2e_p99_us"), Reduce::Max, 0),
            ("end-to-end max", us("e2e_max_us"), Reduce::Max, 0),
        ],
        json!({"yLabel": "latency", "unitY": "ns", "logY": true}),
    ), "Latency per second (log scale)", "publish = acknowledgement − intended send time; end-to-end = receive − intended send time; of the messages acknowledged or received in each second");
    page.add_chart(time_chart(
        "backlog",
        &xs,
        vec![
            ("consumer backlog", col("backlog"), Reduce::Max, 0),
            ("schedule lag max", us("schedule_lag_max_us"), Reduce::Max, 1),
        ],
        json!({"yLabel": "messages", "unitY": "count", "y2Label": "schedule lag", "unitY2": "ns"}),
    ), "Backlog and schedule lag", "backlog = acknowledged − received so far; schedule lag = actual − intended send time (growing lag: the generator could not keep up)");
}

/// Broker, client and host resources over time (resources.csv).
fn resources(page: &mut Page, run: &RunFolder) {
    let Some(r) = Columns::read(&run.dir.join("resources.csv")).filter(|r| r.rows > 0) else {
        return;
    };
    let rx: Vec<f64> = r
        .get("time_ns")
        .map(|v| {
            v.iter()
                .map(|t| t.unwrap_or(0.0) / 1e9 - run.start_s)
                .collect()
        })
        .unwrap_or_default();
    page.body.push_str("<div class=\"grid2\">");
    broker_client_cpu_chart(page, &r, &rx);
    broker_memory_disk_chart(page, &r, &rx);
    host_cpu_chart(page, &r, &rx);
    host_network_chart(page, &r, &rx);
    let per_s = |name: &str| bytes_per_second(&r, name);
    for (spec, title, note) in super::nodes::charts(&r, &rx, per_s) {
        page.add_chart(spec, title, note);
    }
    page.body.push_str("</div>");
}

/// A column of resources.csv (empty when it is absent).
fn column(r: &Columns, name: &str) -> Vec<Option<f64>> {
    r.get(name).cloned().unwrap_or_default()
}

/// A column of per-interval byte counts of resources.csv, as bytes per second.
fn bytes_per_second(r: &Columns, name: &str) -> Vec<Option<f64>> {
    let interval = column(r, "interval_s");
    column(r, name)
        .iter()
        .zip(&interval)
        .map(|(b, i)| match (b, i) {
            (Some(b), Some(i)) if *i > 0.0 => Some(b / i),
            _ => None,
        })
        .collect()
}

/// The broker's and the client's CPU, user and system.
fn broker_client_cpu_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    page.add_chart(
        time_chart(
            "cpu",
            rx,
            vec![
                (
                    "broker usr",
                    column(r, "broker_cpu_user_pct"),
                    Reduce::Max,
                    0,
                ),
                (
                    "broker sys",
                    column(r, "broker_cpu_system_pct"),
                    Reduce::Max,
                    0,
                ),
                (
                    "client usr",
                    column(r, "client_cpu_user_pct"),
                    Reduce::Max,
                    0,
                ),
                (
                    "client sys",
                    column(r, "client_cpu_system_pct"),
                    Reduce::Max,
                    0,
                ),
            ],
            json!({"yLabel": "% of one core", "unitY": "pct", "height": 220}),
        ),
        "Broker and client CPU",
        "percent of one core, user and system",
    );
}

/// The broker's resident memory and what it wrote to disk per second; no chart when no broker
/// process was sampled (a broker brokerbench does not manage and was not pointed at, or the
/// in-memory mock).
fn broker_memory_disk_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    if column(r, "broker_rss_bytes").iter().all(Option::is_none) {
        return;
    }
    page.add_chart(
        time_chart(
            "broker-memory-disk",
            rx,
            vec![
                ("broker RSS", column(r, "broker_rss_bytes"), Reduce::Max, 0),
                (
                    "broker disk written/s",
                    bytes_per_second(r, "broker_disk_written_bytes"),
                    Reduce::Mean,
                    1,
                ),
            ],
            json!({"yLabel": "RSS", "unitY": "bytes", "y2Label": "written per second", "unitY2": "bytes", "height": 220}),
        ),
        "Broker memory and disk writes",
        "resident set size; bytes really sent to storage per second",
    );
}

/// The host's CPU: user, system, I/O wait and interrupts.
fn host_cpu_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    page.add_chart(
        time_chart(
            "host-cpu",
            rx,
            vec![
                ("usr", column(r, "host_cpu_user_pct"), Reduce::Max, 0),
                ("sys", column(r, "host_cpu_system_pct"), Reduce::Max, 0),
                ("iowait", column(r, "host_cpu_iowait_pct"), Reduce::Max, 0),
                ("irq", column(r, "host_cpu_irq_pct"), Reduce::Max, 0),
            ],
            json!({"yLabel": "% of all CPUs", "unitY": "pct", "height": 220}),
        ),
        "Host CPU",
        "percent of all CPUs, as mpstat computes it",
    );
}

/// The host's network traffic per second, received and sent.
fn host_network_chart(page: &mut Page, r: &Columns, rx: &[f64]) {
    page.add_chart(
        time_chart(
            "host-net",
            rx,
            vec![
                (
                    "received/s",
                    bytes_per_second(r, "host_net_rx_bytes"),
                    Reduce::Mean,
                    0,
                ),
                (
                    "sent/s",
                    bytes_per_second(r, "host_net_tx_bytes"),
                    Reduce::Mean,
                    0,
                ),
            ],
            json!({"yLabel": "bytes per second", "unitY": "bytes", "height": 220}),
        ),
        "Host network (all interfaces, loopback included)",
        "",
    );
}

/// A broker figure's unit, from its name (docs/src/broker-metrics.md): a ratio is 0–1,
/// shown as %.
fn broker_metric_unit(name: &str) -> &'static str {
    if name.ends_with("_bytes") {
        "bytes"
    } else if name.ends_with("_ratio") {
        "ratio"
    } else {
        "count"
    }
}

/// One chart per figure the broker's own metrics gave (broker-metrics.csv).
fn broker_metrics(page: &mut Page, run: &RunFolder, s: Option<&Json>) {
    let Some(b) = Columns::read(&run.dir.join("broker-metrics.csv")).filter(|b| b.rows > 0) else {
        return;
    };
    let bx: Vec<f64> = b
        .get("time_s")
        .map(|v| v.iter().map(|t| t.unwrap_or(0.0) - run.start_s).collect())
        .unwrap_or_default();
    let mut names: Vec<&String> = b
        .numbers
        .keys()
        .filter(|k| k.as_str() != "time_s")
        .collect();
    names.sort();
    let source = s
        .and_then(|s| s["broker_metrics"]["source"].as_str())
        .unwrap_or("broker");
    let _ = write!(
        page.body,
        "<h2>The broker's own metrics <small>({}; each name is defined in docs/src/broker-metrics.md)</small></h2><div class=\"grid2\">",
        esc(source)
    );
    let (per_node, names): (Vec<&String>, Vec<&String>) = names
        .into_iter()
        .partition(|name| super::nodes::metric_node(name, &b).is_some());
    for name in names {
        let values = b.get(name).cloned().unwrap_or_default();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let id = format!(
            "broker-{}",
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        );
        let unit = broker_metric_unit(name);
        let node_lines = super::nodes::metric_nodes(name, &per_node, &b);
        let (label, note) = match node_lines.is_empty() {
            true => (name.as_str(), ""),
            false => (
                "cluster",
                "the cluster's figure, and each node's alone (a gap: the node did not answer)",
            ),
        };
        let mut series = vec![(label, values, Reduce::Max, 0)];
        series.extend(
            node_lines
                .iter()
                .map(|(label, values)| (label.as_str(), values.clone(), Reduce::Max, 0)),
        );
        page.add_chart(
            time_chart(
                &id,
                &bx,
                series,
                json!({"yLabel": name, "unitY": unit, "height": 170}),
            ),
            name,
            note,
        );
    }
    page.body.push_str("</div>");
}

/// Latency by percentile over the whole window (window.hlog).
fn percentile_spectrum(page: &mut Page, histograms: &[(&str, Histogram<u64>)]) {
    if histograms.iter().all(|(_, h)| h.is_empty()) {
        return;
    }
    let sx = spectrum_xs();
    page.charts.push(json!({
        "id": "spectrum",
        "x": "spectrum",
        "xLabel": "percentile",
        "xMax": 1e5,
        "xs": json_xs(&sx),
        "yLabel": "latency",
        "unitY": "ns",
        "logY": true,
        "series": histograms.iter().filter(|(_, h)| !h.is_empty()).map(|(label, h)| json!({
            "label": label,
            "values": json_series(&spectrum(h, &sx)),
        })).collect::<Vec<_>>(),
    }));
    page.body.push_str("<h2>Latency percentile spectrum</h2>");
    page.body.push_str(&chart_div("spectrum", "Latency by percentile (measurement window)", "from the whole HdrHistograms of the window (window.hlog): x is the percentile on a 1/(1−p) scale, so each decade to the right is one more nine"));
}

/// The integrity table rows: (summary.json path, label).
const INTEGRITY_ROWS: [(&str, &str); 13] = [
    ("total.sent", "sent"),
    ("total.acknowledged", "acknowledged"),
    ("total.failed", "failed"),
    ("total.received", "received (every copy)"),
    (
        "integrity.lost",
        "lost (acknowledged, and the consumers moved past it)",
    ),
    (
        "integrity.unconsumed",
        "unconsumed (still stored beyond the consumers' positions)",
    ),
    ("integrity.duplicated", "duplicated"),
    ("integrity.out_of_order", "out of order"),
    (
        "integrity.unacknowledged",
        "unacknowledged when the drain ended",
    ),
    (
        "integrity.received_unacknowledged",
        "received although not acknowledged",
    ),
    (
        "integrity.dropped_by_broker",
        "dropped by the broker by policy",
    ),
    (
        "integrity.undelivered",
        "undelivered (sent at most once, never received)",
    ),
    (
        "integrity.foreign",
        "foreign (not sent by this run), ignored",
    ),
];

/// The delivery ledger's counts over the whole run.
fn integrity(body: &mut String, s: &Json) {
    body.push_str("<h2>Integrity <small>(whole run, from the delivery ledger)</small></h2><table><thead><tr><th class=\"text\">count</th><th>messages</th></tr></thead><tbody>");
    for (path, label) in INTEGRITY_ROWS {
        let v = number_at(s, path).unwrap_or(0.0);
        let _ = write!(
            body,
            "<tr data-key=\"{path}\"><td class=\"text\">{}</td><td>{v:.0}</td></tr>",
            esc(label)
        );
    }
    let checked = s["integrity"]["checked"].as_bool() == Some(true);
    body.push_str("</tbody></table>");
    let consumers = s["consumers"].as_array().is_some_and(|c| !c.is_empty());
    if !checked && consumers {
        body.push_str("<p class=\"legend-note\">One shard of a run: its consumers read other shards' messages too, so loss, duplicates and order are counted by <code>brokerbench merge</code>.</p>");
    } else if !checked {
        body.push_str("<p class=\"legend-note\">No consumers: loss, duplicates and order were not checked.</p>");
    }
}

/// The shards of a merged run (shards.csv): each one's rate, cost, schedule lag and clock.
fn shards_table(dir: &Path) -> Option<String> {
    let mut reader = csv::Reader::from_path(dir.join("shards.csv")).ok()?;
    let headers = reader.headers().ok()?.clone();
    let rows: Vec<csv::StringRecord> = reader.records().flatten().collect();
    let cell = |row: &csv::StringRecord, name: &str| -> String {
        headers
            .iter()
            .position(|h| h == name)
            .and_then(|i| row.get(i))
            .unwrap_or("")
            .to_string()
    };
    let number = |row: &csv::StringRecord, name: &str| cell(row, name).parse::<f64>().ok();
    let mut body = String::from(
        "<h2>Shards <small>(each load generator: an overloaded one shows schedule lag)</small></h2><div class=\"scroll\"><table><thead><tr><th>shard</th><th class=\"text\">host</th><th>producers</th><th>consumers</th><th>target msg/s</th><th>acknowledged msg/s</th><th>received msg/s</th><th>client CPU-s per M msgs</th><th>peak RSS</th><th>schedule lag p99</th><th>schedule lag max</th><th>clock offset to shard 0</th></tr></thead><tbody>",
    );
    for row in &rows {
        let ns = |name: &str| {
            number(row, name).map_or(String::new(), |v| format_nanos(v.max(0.0) as u64))
        };
        let bound = if cell(row, "client_bound") == "true" {
            " <b>CLIENT-BOUND</b>"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{bound}</td><td>{}</td><td>{} ± {}</td></tr>",
            esc(&cell(row, "shard")),
            esc(&cell(row, "host")),
            esc(&cell(row, "producers")),
            esc(&cell(row, "consumers")),
            number(row, "target_msg_s").map_or("max".to_string(), |v| format!("{v:.0}")),
            number(row, "acknowledged_msg_s").map_or(String::new(), |v| format!("{v:.0}")),
            number(row, "received_msg_s").map_or(String::new(), |v| format!("{v:.0}")),
            number(row, "cpu_s_per_million").map_or(String::new(), |v| format!("{v:.2}")),
            number(row, "peak_rss_bytes").map_or(String::new(), |v| format!("{:.1} MiB", v / 1048576.0)),
            ns("schedule_lag_p99_ns"),
            ns("schedule_lag_max_ns"),
            number(row, "clock_offset_ns").map_or(String::new(), |v| format!("{:+.3} ms", v / 1e6)),
            number(row, "clock_round_trip_ns").map_or(String::new(), |v| format!("{:.3} ms", v / 2e6)),
        );
    }
    body.push_str("</tbody></table></div>");
    Some(body)
}
