//! Charts as the run report builds them: a time chart's spec from columns, and the page that
//! collects each chart's spec and placeholder. The per-node charts use them too.

use serde_json::{json, Value as Json};

use super::chart_div;
use super::data::{json_series, json_xs, reduce, Reduce};

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
pub(super) struct Page {
    pub(super) body: String,
    pub(super) charts: Vec<Json>,
}

impl Page {
    /// Adds a chart: its spec to the data, its placeholder to the page.
    pub(super) fn add_chart(&mut self, spec: Json, title: &str, note: &str) {
        self.body.push_str(&chart_div(
            spec["id"].as_str().unwrap_or_default(),
            title,
            note,
        ));
        self.charts.push(spec);
    }
}
