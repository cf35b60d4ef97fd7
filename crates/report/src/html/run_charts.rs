//! The run's own measurements as charts: rates, latency and backlog per second
//! (timeseries.csv), and latency by percentile over the whole window (window.hlog).

use hdrhistogram::Histogram;
use serde_json::{json, Value as Json};

use super::chart::{time_chart, Page};
use super::chart_div;
use super::data::{json_series, json_xs, number_at, spectrum, spectrum_xs, Reduce};
use super::run_folder::RunFolder;

/// Rates, latency, backlog and schedule lag per second (timeseries.csv).
pub(super) fn over_time(page: &mut Page, run: &RunFolder, s: Option<&Json>) {
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

/// Latency by percentile over the whole window (window.hlog).
pub(super) fn percentile_spectrum(page: &mut Page, histograms: &[(&str, Histogram<u64>)]) {
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
