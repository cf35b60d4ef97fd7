//! study.json, runs.csv, cells.csv and search.json, rewritten after every run.

use super::*;

/// Now, ns since the UNIX epoch, on the process clock every timestamp of a run uses.
pub(super) fn now_ns() -> u64 {
    brokerbench_engine::Clock::process().now_ns()
}

pub(super) fn write_state_file(dir: &Path, state: &mut StudyState) -> anyhow::Result<()> {
    state.updated_at = rfc3339_utc(now_ns());
    let text = serde_json::to_string_pretty(state)?;
    write_atomically(&dir.join(STUDY_FILE), text.as_bytes())
        .with_context(|| format!("writing {}", dir.join(STUDY_FILE).display()))
}

/// Reads the headline numbers of the runs that do not have them yet from their summaries:
/// each run's summary.json is read once, not after every run of the study.
pub(super) fn fill_headlines(dir: &Path, runs: &mut [RunRecord]) {
    for r in runs.iter_mut().filter(|r| r.headline.is_empty()) {
        if let Ok(summary) = read_json(&dir.join(&r.results).join(brokerbench_report::SUMMARY_FILE))
        {
            r.headline = metrics::headline(&summary);
        }
    }
}

/// Rewrites study.json, runs.csv/json and cells.csv/json (columns named by the study's axes).
pub(super) fn write_state(dir: &Path, state: &mut StudyState, search: bool) -> anyhow::Result<()> {
    write_state_file(dir, state)?;
    fill_headlines(dir, &mut state.runs);
    let (axis_names, records) = (&state.axes, &state.runs);
    let runs = runs_table(axis_names, search, records);
    let cells = cells_table(axis_names, search, &cell_stats(axis_names, search, records));
    for (table, name) in [(&runs, "runs"), (&cells, "cells")] {
        let csv = dir.join(format!("{name}.csv"));
        table
            .write_csv(&csv)
            .with_context(|| format!("writing {}", csv.display()))?;
        table
            .write_json(&dir.join(format!("{name}.json")))
            .with_context(|| format!("writing {name}.json"))?;
    }
    refresh_report(dir);
    Ok(())
}

/// Writes the study's report.html again from what the folder holds now; a report that cannot
/// be written is a warning, never the end of the study.
pub(super) fn refresh_report(dir: &Path) {
    if let Err(e) = brokerbench_report::html::write_folder_report(dir) {
        eprintln!("warning: no study report.html: {e}");
    }
}

pub(super) fn search_json(run: &PlannedRun, search: &Search, status: &str) -> Json {
    serde_json::json!({
        "cell": run.cell + 1,
        "axes": run.values.iter().map(|(p, v)| (p.clone(), redacted_value(p, v))).collect::<serde_json::Map<_, _>>(),
        "repetition": run.repetition,
        "status": status,
        "found_rate": search.found_rate(),
        "bracket": [search.last_pass, search.first_fail],
        "steps": search.steps,
    })
}

/// search.json: the definition, every search, and for a single search its result at the top.
pub(super) fn write_search(dir: &Path, spec: &FindSpec, searches: &[Json]) -> anyhow::Result<()> {
    let mut doc = serde_json::json!({
        "definition": {
            "sustainable_when": [
                format!("acknowledged rate >= {}% of the offered rate (received rate when publishing is unconfirmed)", brokerbench_study::search::MIN_DELIVERED_SHARE * 100.0),
                format!("consumer backlog slope over the measurement window < {}% of the offered rate per second", brokerbench_study::search::MAX_BACKLOG_SLOPE_SHARE * 100.0),
                "not client-bound (the generator kept its schedule)".to_string(),
                "no message lost, no send failed".to_string(),
                "every SLO holds".to_string(),
            ],
            "settings": spec,
        },
        "searches": searches,
    });
    if let [only] = searches {
        for key in ["status", "found_rate", "bracket", "steps"] {
            doc[key] = only[key].clone();
        }
    }
    write_atomically(
        &dir.join("search.json"),
        serde_json::to_string_pretty(&doc)?.as_bytes(),
    )
    .context("writing search.json")
}

pub(super) fn report_search(run: &PlannedRun, search: &Search) {
    let bracket = |v: Option<f64>| v.map_or("none".into(), format_rate);
    match search.found_rate() {
        Some(rate) => println!(
            "cell {} rep {}: maximum sustainable rate {} msg/s (bracket {} … {}, {} steps)",
            run.cell + 1,
            run.repetition,
            format_rate(rate),
            bracket(search.last_pass),
            bracket(search.first_fail),
            search.steps.len()
        ),
        None => println!(
            "cell {} rep {}: no offered rate was sustained (lowest tried {} msg/s)",
            run.cell + 1,
            run.repetition,
            bracket(search.first_fail)
        ),
    }
}
