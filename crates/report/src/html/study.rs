//! The study report: each headline number against the first axis (one series per value of
//! the second, small multiples for the rest) with 95% CI whiskers, the sortable cells table
//! linking every run's report, and for a search, offered against achieved rate and latency.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value as Json};

use super::data::{json_series, json_xs, read_json};
use super::headline::show;
use super::{chart_div, esc, page, HtmlError, REPORT_FILE};

/// Numbers charted against the axes: (headline path, title, unit for the page, y unit).
const CHARTED: &[(&str, &str, &str, &str)] = &[
    (
        "throughput.acknowledged_per_s",
        "Acknowledged msg/s",
        "rate",
        "count",
    ),
    ("latency.publish.p50_ns", "Publish latency p50", "ns", "ns"),
    ("latency.publish.p99_ns", "Publish latency p99", "ns", "ns"),
    (
        "latency.end_to_end.p99_ns",
        "End-to-end latency p99",
        "ns",
        "ns",
    ),
    (
        "client.cpu_s_per_million_messages",
        "Client CPU-s per million messages",
        "plain",
        "count",
    ),
    ("client.peak_rss_bytes", "Client peak RSS", "bytes", "bytes"),
    (
        "resources.broker.cpu_user_pct_mean",
        "Broker CPU usr %",
        "plain",
        "pct",
    ),
];

fn text(v: &Json) -> String {
    match v {
        Json::String(s) => Path::new(s)
            .file_name()
            .filter(|_| s.contains('/'))
            .map_or(s.clone(), |n| n.to_string_lossy().into_owned()),
        Json::Null => "—".into(),
        other => other.to_string(),
    }
}

pub(crate) fn study_report(dir: &Path, written: super::Written) -> Result<String, HtmlError> {
    let study = read_json(&dir.join("study.json"))
        .ok_or_else(|| HtmlError::input(dir, "study.json is not readable"))?;
    let cells = json_array(&dir.join("cells.json"));
    let runs = json_array(&dir.join("runs.json"));
    let axes = study_axes(&study);
    let name = study["name"].as_str().unwrap_or("study");
    let mut body = heading(&study, &runs);
    if written == super::Written::Final {
        status_banner(study["status"].as_str().unwrap_or("?"), &mut body);
    }
    failed_runs(&runs, &mut body);
    broker_host_and_axes(&study, &axes, &mut body);

    let mut charts = Vec::new();
    let search = read_json(&dir.join("search.json"));
    if let Some(search) = &search {
        search_charts(search, &mut body, &mut charts);
    } else if !cells.is_empty() {
        grid_charts(&axes, &cells, &mut body, &mut charts);
    }

    // The cells table, sortable, each cell linking its runs' reports.
    cells_table(&axes, &cells, &runs, search.is_some(), &mut body);
    body.push_str("<p class=\"legend-note\">All numbers per run are in runs.csv and cells.csv beside this file.</p>");
    Ok(page(
        &format!("brokerbench study: {name}"),
        &body,
        charts,
        json!([]),
    ))
}

/// The array in a JSON file; none when the file is missing, unreadable or holds no array.
fn json_array(path: &Path) -> Vec<Json> {
    read_json(path)
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default()
}

/// The study's axes, first axis first.
fn study_axes(study: &Json) -> Vec<String> {
    // Folders written before study.json named its axes: the definition's (sorted) keys.
    match study["axes"].as_array() {
        Some(a) => a
            .iter()
            .filter_map(Json::as_str)
            .map(String::from)
            .collect(),
        None => study["definition"]["axes"]
            .as_object()
            .map(|a| a.keys().cloned().collect())
            .unwrap_or_default(),
    }
}

/// The title, with the study file, its status, how far it got and when it started.
fn heading(study: &Json, runs: &[Json]) -> String {
    let name = study["name"].as_str().unwrap_or("study");
    let status = study["status"].as_str().unwrap_or("?");
    let done = runs.iter().filter(|r| r["status"] == "complete").count();
    let planned = study["planned"].as_u64().unwrap_or(0);
    let progress = if study["search"].is_null() {
        format!("{done} of {planned} runs complete")
    } else {
        format!("{planned} search(es), {done} steps complete")
    };
    format!(
        "<h1>Study {}</h1><p class=\"sub\">{} · status <b>{}</b> · {} · started {}</p>",
        esc(name),
        esc(study["file"].as_str().unwrap_or("")),
        esc(status),
        esc(&progress),
        esc(study["started_at"].as_str().unwrap_or("?"))
    )
}

/// The banner of a study that is not complete: still running, or to be resumed.
fn status_banner(status: &str, body: &mut String) {
    match status {
        "complete" => {}
        "running" => body.push_str("<div class=\"banner warn\">Running (or killed while running): this report is rewritten after every run.</div>"),
        other => {
            let _ = write!(body, "<div class=\"banner bad\">{}: run the same command again to resume.</div>", esc(&other.to_uppercase()));
        }
    }
}

/// The failed runs with their errors, when there are any.
fn failed_runs(runs: &[Json], body: &mut String) {
    let failed: Vec<&Json> = runs.iter().filter(|r| r["status"] == "failed").collect();
    if !failed.is_empty() {
        body.push_str("<h2>Failed runs</h2><ul class=\"notes\">");
        for r in failed {
            let _ = write!(
                body,
                "<li>run {} (cell {}, repetition {}): {}</li>",
                r["run"],
                r["cell"],
                r["repetition"],
                esc(r["error"].as_str().unwrap_or("no error recorded"))
            );
        }
        body.push_str("</ul>");
    }
}

/// The broker, the host and the axes of the study.
fn broker_host_and_axes(study: &Json, axes: &[String], body: &mut String) {
    let broker = &study["broker"];
    let _ = write!(
        body,
        "<dl class=\"meta\"><dt>broker</dt><dd>{}</dd><dt>host</dt><dd>{} · {} CPUs</dd><dt>axes</dt><dd>{}</dd></dl>",
        esc(&format!(
            "{}{} at {}{}",
            broker["family"].as_str().map_or(String::new(), |f| format!("{f} ")),
            broker["version"].as_str().unwrap_or("(version unknown)"),
            broker["address"].as_str().unwrap_or("?"),
            match broker["several"].as_bool() {
                Some(true) => " (the first run's: the runs used brokers of several families)",
                _ => "",
            }
        )),
        esc(study["host"]["hostname"].as_str().unwrap_or("?")),
        study["host"]["cpus"],
        esc(&if axes.is_empty() { "none".to_string() } else { axes.join(" × ") })
    );
}

/// The cells table, sortable, each cell linking its runs' reports; with the offered rate of
/// each step for a `search`.
fn cells_table(axes: &[String], cells: &[Json], runs: &[Json], search: bool, body: &mut String) {
    cells_table_head(axes, search, body);
    for c in cells {
        cell_row(c, axes, runs, search, body);
    }
    body.push_str("</tbody></table></div>");
}

/// The heading and the column names of the cells table.
fn cells_table_head(axes: &[String], search: bool, body: &mut String) {
    body.push_str("<h2>Cells <small>(mean ± 95% CI over repetitions; click a heading to sort)</small></h2><div class=\"scroll\"><table class=\"sortable\" id=\"cells\"><thead><tr><th>cell</th>");
    for a in axes {
        let _ = write!(body, "<th class=\"text\">{}</th>", esc(a));
    }
    if search {
        body.push_str("<th>offered msg/s</th>");
    }
    body.push_str("<th>n</th>");
    for (_, title, _, _) in CHARTED {
        let _ = write!(body, "<th>{}</th>", esc(title));
    }
    body.push_str("<th>lost</th><th class=\"text\">runs</th></tr></thead><tbody>");
}

/// One cell's row: its axis values, its numbers and links to its runs' reports.
fn cell_row(c: &Json, axes: &[String], runs: &[Json], search: bool, body: &mut String) {
    let _ = write!(body, "<tr><td>{}</td>", c["cell"]);
    for a in axes {
        let _ = write!(
            body,
            "<td class=\"text\">{}</td>",
            esc(&text(&c[a.as_str()]))
        );
    }
    if search {
        let _ = write!(
            body,
            "<td data-value=\"{}\">{}</td>",
            c["offered_rate"],
            esc(&c["offered_rate"]
                .as_f64()
                .map_or("—".into(), |r| show(r, "rate")))
        );
    }
    let _ = write!(body, "<td>{}</td>", c["n"]);
    cell_numbers(c, body);
    let links = run_links(c, runs, search);
    let _ = write!(body, "<td class=\"text\">{}</td></tr>", links.join(" "));
}

/// A cell's charted numbers and its lost messages: mean ± half the 95% CI.
fn cell_numbers(c: &Json, body: &mut String) {
    for (path, _, unit, _) in CHARTED
        .iter()
        .chain([&("integrity.lost", "lost", "plain", "count")])
    {
        let mean = c[format!("{path}.mean").as_str()].as_f64();
        let low = c[format!("{path}.ci95_low").as_str()].as_f64();
        let high = c[format!("{path}.ci95_high").as_str()].as_f64();
        match mean {
            Some(m) => {
                let ci = match (low, high) {
                    (Some(l), Some(h)) => format!(" ± {}", show((h - l) / 2.0, unit)),
                    _ => String::new(),
                };
                let _ = write!(
                    body,
                    "<td data-key=\"{path}\" data-value=\"{m}\">{}{}</td>",
                    esc(&show(m, unit)),
                    esc(&ci)
                );
            }
            None => body.push_str("<td>—</td>"),
        }
    }
}

/// Links to the reports of a cell's complete runs (of a `search`: those at the cell's
/// offered rate).
fn run_links(c: &Json, runs: &[Json], search: bool) -> Vec<String> {
    runs.iter()
        .filter(|r| r["cell"] == c["cell"] && r["status"] == "complete")
        .filter(|r| !search || r["target_rate"] == c["offered_rate"])
        .filter_map(|r| {
            let results = r["results"].as_str()?;
            Some(format!(
                "<a href=\"{}/{REPORT_FILE}\">r{}{}</a>",
                esc(results),
                r["repetition"],
                r["step"]
                    .as_u64()
                    .map(|s| format!("s{s}"))
                    .unwrap_or_default()
            ))
        })
        .collect()
}

/// The first axis as the charts' x axis: its name, its values in order, and where each
/// value sits.
struct FirstAxis<'a> {
    name: &'a str,
    /// The values, in first-seen order, sorted when all are numbers.
    values: Vec<Json>,
    /// Where each value sits on the x axis: the value itself when all are numbers,
    /// otherwise its place.
    xs: Vec<f64>,
    numeric: bool,
    /// Read on a log scale.
    log: bool,
}

/// The first axis of a grid, from its cells.
fn first_axis<'a>(name: &'a str, cells: &[Json]) -> FirstAxis<'a> {
    // The first axis's values, in first-seen order; numeric when all are numbers.
    let mut values: Vec<Json> = Vec::new();
    for c in cells {
        if !values.contains(&c[name]) {
            values.push(c[name].clone());
        }
    }
    let numeric = values.iter().all(Json::is_number);
    if numeric {
        values.sort_by(|a, b| {
            a.as_f64()
                .partial_cmp(&b.as_f64())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    // Values over two or more decades (1, 10, 100, 1000 topics) are read on a log scale.
    let log = numeric && {
        let numbers: Vec<f64> = values.iter().filter_map(Json::as_f64).collect();
        let (min, max) = numbers
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        min > 0.0 && max / min >= 100.0
    };
    let xs: Vec<f64> = if numeric {
        values.iter().filter_map(Json::as_f64).collect()
    } else {
        (0..values.len()).map(|i| i as f64).collect()
    };
    FirstAxis {
        name,
        values,
        xs,
        numeric,
        log,
    }
}

/// A cell's values of the axes `names`, as `name=value, …`.
fn axes_key(c: &Json, names: &[String]) -> String {
    names
        .iter()
        .map(|a| format!("{a}={}", text(&c[a.as_str()])))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Charts of a grid: each charted number against the first axis.
fn grid_charts(axes: &[String], cells: &[Json], body: &mut String, charts: &mut Vec<Json>) {
    let Some(first) = axes.first() else {
        return; // one cell: the table says it all
    };
    let axis = first_axis(first, cells);
    let second: Vec<String> = axes.iter().skip(1).take(1).cloned().collect();
    let rest: Vec<String> = axes.iter().skip(2).cloned().collect();
    // Small multiples: one chart per combination of the third and later axes.
    let mut panels: BTreeMap<String, Vec<&Json>> = BTreeMap::new();
    for c in cells {
        panels.entry(axes_key(c, &rest)).or_default().push(c);
    }
    body.push_str(&format!(
        "<h2>Against {}</h2><p class=\"legend-note\">{}Whiskers: 95% confidence interval of the mean over the repetitions.</p>",
        esc(first),
        if second.is_empty() {
            String::new()
        } else {
            format!("One line per value of {}. ", esc(&second[0]))
        }
    ));
    let mut n = 0;
    // One panel: the numbers side by side; several: each number's panels side by side.
    let single = panels.len() == 1;
    if single {
        body.push_str("<div class=\"grid2\">");
    }
    for (path, title, _, unit) in CHARTED {
        if !single {
            body.push_str("<div class=\"grid2\">");
        }
        for (panel, members) in &panels {
            let series = panel_series(&axis, &second, members, path, title);
            if series.is_empty() {
                continue;
            }
            n += 1;
            let id = format!("axis-{n}");
            charts.push(axis_chart(&axis, &id, title, unit, &series));
            let heading = if panel.is_empty() {
                title.to_string()
            } else {
                format!("{title} — {panel}")
            };
            body.push_str(&chart_div(&id, &heading, ""));
        }
        if !single {
            body.push_str("</div>");
        }
    }
    if single {
        body.push_str("</div>");
    }
}

/// The lines of one panel of the number at `path`: one per value of the `second` axis (with
/// 95% CI bounds), none where the panel's cells lack the number.
fn panel_series(
    axis: &FirstAxis<'_>,
    second: &[String],
    members: &[&Json],
    path: &str,
    title: &str,
) -> Vec<Json> {
    let mut lines: BTreeMap<String, Vec<&Json>> = BTreeMap::new();
    for c in members {
        lines.entry(axes_key(c, second)).or_default().push(c);
    }
    let mut series = Vec::new();
    for (label, line) in &lines {
        let pick = |stat: &str| -> Vec<Option<f64>> {
            axis.values
                .iter()
                .map(|x| {
                    line.iter()
                        .find(|c| c[axis.name] == *x)
                        .and_then(|c| c[format!("{path}.{stat}").as_str()].as_f64())
                })
                .collect()
        };
        let mean = pick("mean");
        if mean.iter().all(Option::is_none) {
            continue;
        }
        series.push(json!({
            "label": if label.is_empty() { title.to_string() } else { label.clone() },
            "values": json_series(&mean),
            "low": json_series(&pick("ci95_low")),
            "high": json_series(&pick("ci95_high")),
        }));
    }
    series
}

/// The spec of one chart of a number against the first axis.
fn axis_chart(axis: &FirstAxis<'_>, id: &str, title: &str, unit: &str, series: &[Json]) -> Json {
    let mut spec = json!({
        "id": id, "x": "linear", "xLabel": axis.name, "xs": json_xs(&axis.xs),
        "yLabel": title, "unitY": unit, "points": true, "series": series, "height": 240,
    });
    if !axis.numeric {
        spec["xLabels"] = Json::Array(axis.values.iter().map(|v| Json::from(text(v))).collect());
    } else if axis.log {
        spec["logX"] = Json::Bool(true);
    }
    spec
}

/// Charts of a search: offered against achieved, and against latency, with the found rate.
fn search_charts(search: &Json, body: &mut String, charts: &mut Vec<Json>) {
    let searches = search["searches"].as_array().cloned().unwrap_or_default();
    found_rates(&searches, body);
    for (i, s) in searches.iter().enumerate() {
        step_charts(i, s, searches.len() > 1, body, charts);
    }
}

/// The maximum sustainable throughput each search found, with its bracket and steps.
fn found_rates(searches: &[Json], body: &mut String) {
    body.push_str("<h2>Maximum sustainable throughput</h2><ul>");
    for s in searches {
        let found = s["found_rate"].as_f64();
        let running = s["status"] == "running";
        let _ = write!(
            body,
            "<li>cell {} repetition {}: <b>{}</b> (bracket {} … {}, {} steps{})</li>",
            s["cell"],
            s["repetition"],
            match (running, found) {
                (true, _) => "searching".to_string(),
                (false, None) => "no offered rate was sustained".to_string(),
                (false, Some(r)) => format!("{} msg/s", show(r, "rate")),
            },
            s["bracket"][0]
                .as_f64()
                .map_or("—".into(), |r| show(r, "rate")),
            s["bracket"][1]
                .as_f64()
                .map_or("—".into(), |r| show(r, "rate")),
            s["steps"].as_array().map_or(0, Vec::len),
            if running { " so far" } else { "" }
        );
    }
    body.push_str("</ul>");
}

/// The found rate and the first failing one, marked on a search's charts.
fn search_markers(s: &Json) -> Vec<Json> {
    let mut markers = Vec::new();
    let found = match s["status"] == "running" {
        true => "held so far",
        false => "found",
    };
    if let Some(f) = s["found_rate"].as_f64() {
        markers.push(
            json!({"x": f, "label": format!("{found} {}", show(f, "rate")), "color": "#2ca02c"}),
        );
    }
    if let Some(f) = s["bracket"][1].as_f64() {
        markers.push(json!({"x": f, "label": "first failing", "color": "#d62728"}));
    }
    markers
}

/// The `i`th search's steps: offered against achieved rate, and offered rate against
/// latency; the titles name the search when there are `several`.
fn step_charts(i: usize, s: &Json, several: bool, body: &mut String, charts: &mut Vec<Json>) {
    let mut steps: Vec<Json> = s["steps"].as_array().cloned().unwrap_or_default();
    steps.sort_by(|a, b| {
        a["offered"]
            .as_f64()
            .partial_cmp(&b["offered"].as_f64())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    if steps.is_empty() {
        return;
    }
    let xs: Vec<f64> = steps.iter().filter_map(|s| s["offered"].as_f64()).collect();
    let col = |k: &str| -> Vec<Option<f64>> { steps.iter().map(|s| s[k].as_f64()).collect() };
    let passed: Vec<Option<f64>> = steps
        .iter()
        .map(|s| {
            if s["sustainable"] == true {
                s["achieved"].as_f64()
            } else {
                None
            }
        })
        .collect();
    let markers = search_markers(s);
    let suffix = if several {
        format!(" (cell {}, repetition {})", s["cell"], s["repetition"])
    } else {
        String::new()
    };
    let id = format!("search-rate-{i}");
    charts.push(json!({
        "id": id, "x": "linear", "xLabel": "offered msg/s", "xUnit": "count", "xs": json_xs(&xs),
        "yLabel": "msg/s", "unitY": "count", "points": true, "markers": markers,
        "series": [
            {"label": "offered", "values": json_series(&xs.iter().map(|x| Some(*x)).collect::<Vec<_>>()), "dash": true},
            {"label": "achieved", "values": json_series(&col("achieved"))},
            {"label": "achieved (sustained steps)", "values": json_series(&passed)},
        ],
    }));
    body.push_str(&chart_div(&id, &format!("Offered against achieved rate{suffix}"), "a step is sustained when ≥ 99% is acknowledged, the backlog does not grow, the generator keeps its schedule, nothing is lost and the SLO holds"));
    let id = format!("search-latency-{i}");
    charts.push(json!({
        "id": id, "x": "linear", "xLabel": "offered msg/s", "xUnit": "count", "xs": json_xs(&xs),
        "yLabel": "latency", "unitY": "ns", "logY": true, "points": true, "markers": markers,
        "series": [
            {"label": "publish p50", "values": json_series(&col("publish_p50_ns"))},
            {"label": "publish p99", "values": json_series(&col("publish_p99_ns"))},
            {"label": "end-to-end p50", "values": json_series(&col("end_to_end_p50_ns"))},
            {"label": "end-to-end p99", "values": json_series(&col("end_to_end_p99_ns"))},
        ],
    }));
    body.push_str(&chart_div(
        &id,
        &format!("Offered rate against latency{suffix}"),
        "",
    ));
}

#[cfg(test)]
mod tests;
