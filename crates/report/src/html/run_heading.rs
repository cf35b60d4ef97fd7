//! The top of a run's page: its title, id and status, the banner that says whether it is
//! clean, and what ran where, when and how.

use std::fmt::Write as _;

use brokerbench_model::units::{format_rate, group_thousands};
use serde_json::Value as Json;

use super::data::number_at;
use super::esc;
use super::json_text::{strings, text};

/// The title, the run's id and status, and the banner that says whether it is clean.
pub(super) fn heading(
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
                let _ = write!(
                    body,
                    "<div class=\"banner good\">Complete and clean: no failures, nothing lost, duplicated, out of order or unacknowledged.{}</div>",
                    esc(&not_delivered(s))
                );
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

/// What a clean run did not deliver without breaking a promise (the broker's drops by policy,
/// a backlog still stored, messages sent at most once), as a sentence after the banner's;
/// empty when it delivered everything.
fn not_delivered(s: &Json) -> String {
    let parts: Vec<String> = [
        ("dropped_by_broker", "dropped by the broker's policy"),
        ("unconsumed", "still stored beyond the consumers' positions"),
        ("undelivered", "sent at most once and never received"),
    ]
    .iter()
    .filter_map(|(field, what)| {
        let count = number_at(s, &format!("integrity.{field}")).unwrap_or(0.0) as u64;
        (count > 0).then(|| format!("{} {what}", group_thousands(count)))
    })
    .collect();
    if parts.is_empty() {
        return String::new();
    }
    format!(" Not delivered, and not lost: {}.", parts.join(", "))
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
pub(super) fn meta(body: &mut String, m: &Json, s: Option<&Json>, driver: &str) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Json;

    fn banner(integrity: Json) -> String {
        let m = json!({"status": "complete", "run_id": "r", "started_at": "t"});
        let s = json!({"errors": {}, "integrity": integrity});
        let mut body = String::new();
        super::heading(
            &mut body,
            &m,
            Some(&s),
            "w",
            "d",
            super::super::Written::Final,
        );
        let at = body.find("<div class=\"banner").expect("a banner");
        body[at..].to_string()
    }

    #[test]
    fn a_clean_banner_says_what_was_not_delivered_and_not_lost() {
        let all = banner(json!({"lost": 0}));
        assert!(
            all.starts_with("<div class=\"banner good\">Complete and clean"),
            "{all}"
        );
        assert!(!all.contains("Not delivered"), "{all}");
        let some = banner(json!({"lost": 0, "dropped_by_broker": 1200, "unconsumed": 40}));
        let said = "unacknowledged. Not delivered, and not lost: 1,200 dropped by the broker&#39;s policy, 40 still stored beyond the consumers&#39; positions.</div>";
        assert!(some.contains(said), "{some}");
        let lossy = banner(json!({"lost": 3, "dropped_by_broker": 5}));
        assert!(
            lossy.starts_with("<div class=\"banner bad\">Complete, NOT clean"),
            "{lossy}"
        );
    }
}
