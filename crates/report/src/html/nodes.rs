//! A broker of several nodes in its run's report: each node's CPU, memory and disk writes over
//! time, from resources.csv's per-node columns (`broker_nodeK_*`), beside the broker's sum; and
//! each node's line of a broker metric given per node (broker-metrics.csv's `<key>_nodeK`).

use serde_json::{json, Value as Json};

use super::chart::time_chart;
use super::data::{Columns, Reduce};

/// The nodes that have columns in `r`, in order (none for a broker of one node).
fn node_ids(r: &Columns) -> Vec<u32> {
    let mut ids: Vec<u32> = r
        .numbers
        .keys()
        .filter_map(|name| {
            name.strip_prefix("broker_node")?
                .strip_suffix("_alive")?
                .parse()
                .ok()
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// The per-node charts (spec, title, note), none for a broker of one node. `rx`: the
/// samples' times; `per_s`: a byte column as bytes per second.
pub(super) fn charts(
    r: &Columns,
    rx: &[f64],
    per_s: impl Fn(&str) -> Vec<Option<f64>>,
) -> Vec<(Json, &'static str, &'static str)> {
    let nodes = node_ids(r);
    if nodes.is_empty() {
        return Vec::new();
    }
    let column = |id: u32, name: &str| format!("broker_node{id}_{name}");
    let labels: Vec<String> = nodes.iter().map(|id| format!("node {id}")).collect();
    let cpu = nodes.iter().map(|&id| {
        let user = r.get(&column(id, "cpu_user_pct"));
        let system = r.get(&column(id, "cpu_system_pct"));
        sum(user, system)
    });
    let rss = nodes
        .iter()
        .map(|&id| r.get(&column(id, "rss_bytes")).cloned().unwrap_or_default());
    let written = nodes
        .iter()
        .map(|&id| per_s(&column(id, "disk_written_bytes")));
    let kinds = [
        (
            "node-cpu",
            cpu.collect::<Vec<_>>(),
            Reduce::Max,
            "% of one core",
            "pct",
        ),
        ("node-memory", rss.collect(), Reduce::Max, "RSS", "bytes"),
        (
            "node-disk",
            written.collect(),
            Reduce::Mean,
            "written per second",
            "bytes",
        ),
    ];
    kinds
        .into_iter()
        .zip(TITLES)
        .map(|((id, values, reduce, y_label, unit), (title, note))| {
            let series = labels
                .iter()
                .zip(values)
                .map(|(label, v)| (label.as_str(), v, reduce, 0))
                .collect();
            let options = json!({"yLabel": y_label, "unitY": unit, "height": 220});
            (time_chart(id, rx, series, options), title, note)
        })
        .collect()
}

/// Each per-node chart's title and note, in the order of [`charts`].
const TITLES: [(&str, &str); 3] = [
    (
        "Broker CPU per node",
        "user + system, percent of one core; the broker's CPU above is their sum",
    ),
    (
        "Broker memory per node",
        "resident set size of each node's processes",
    ),
    (
        "Broker disk writes per node",
        "bytes each node really sent to storage per second",
    ),
];

/// `a + b` row by row; unknown where either is.
fn sum(a: Option<&Vec<Option<f64>>>, b: Option<&Vec<Option<f64>>>) -> Vec<Option<f64>> {
    let (Some(a), Some(b)) = (a, b) else {
        return Vec::new();
    };
    a.iter().zip(b).map(|(a, b)| Some((*a)? + (*b)?)).collect()
}

/// The node a broker-metrics.csv column is a per-node figure of (`<key>_node<id>` beside a
/// `<key>` column), if it is one.
pub(super) fn metric_node(column: &str, b: &Columns) -> Option<u32> {
    let (key, id) = column.rsplit_once("_node")?;
    let id = id.parse().ok()?;
    b.numbers.contains_key(key).then_some(id)
}

/// Each node's line of the broker metric `key` among the per-node columns, labelled
/// `node K` and in the nodes' order.
pub(super) fn metric_nodes(
    key: &str,
    per_node: &[&String],
    b: &Columns,
) -> Vec<(String, Vec<Option<f64>>)> {
    let mut lines: Vec<(u32, Vec<Option<f64>>)> = per_node
        .iter()
        .filter(|column| column.rsplit_once("_node").is_some_and(|(k, _)| k == key))
        .filter_map(|column| Some((metric_node(column, b)?, b.get(column)?.clone())))
        .collect();
    lines.sort_by_key(|(id, _)| *id);
    lines
        .into_iter()
        .map(|(id, values)| (format!("node {id}"), values))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(csv: &str) -> Columns {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("resources.csv");
        std::fs::write(&path, csv).unwrap();
        Columns::read(&path).unwrap()
    }

    #[test]
    fn a_broker_of_one_node_has_no_node_charts() {
        let r = columns("time_ns,broker_cpu_user_pct\n1,2\n");
        assert!(charts(&r, &[0.0], |_| Vec::new()).is_empty());
    }

    #[test]
    fn each_node_is_a_line_its_cpu_user_plus_system() {
        let mut header = vec!["time_ns".to_string()];
        let mut row = vec!["1".to_string()];
        for id in 1..=3 {
            for (name, value) in [
                ("alive", 1),
                ("cpu_user_pct", 10 * id),
                ("cpu_system_pct", id),
                ("rss_bytes", 100 * id),
            ] {
                header.push(format!("broker_node{id}_{name}"));
                row.push(value.to_string());
            }
        }
        let r = columns(&format!("{}\n{}\n", header.join(","), row.join(",")));
        let charts = charts(&r, &[0.0], |_| vec![Some(5.0)]);
        let titles: Vec<&str> = charts.iter().map(|c| c.1).collect();
        assert_eq!(
            titles,
            [
                "Broker CPU per node",
                "Broker memory per node",
                "Broker disk writes per node"
            ]
        );
        let cpu = &charts[0].0["series"];
        assert_eq!(cpu.as_array().unwrap().len(), 3, "{cpu:#}");
        assert_eq!(cpu[2]["label"], "node 3");
        assert_eq!(cpu[2]["values"][0].as_f64(), Some(33.0), "{cpu:#}");
        assert_eq!(charts[1].0["series"][1]["values"][0].as_f64(), Some(200.0));
    }

    #[test]
    fn per_node_columns_are_found_beside_their_figure_in_the_nodes_order() {
        let b =
            columns("lag,lag_node3,lag_node1,leader_node2,messages_node_count\n1,1,1,1,1\n,,,,\n");
        assert_eq!(metric_node("lag_node3", &b), Some(3));
        assert_eq!(metric_node("leader_node2", &b), None, "no `leader` figure");
        assert_eq!(metric_node("messages_node_count", &b), None);
        let per_node: Vec<String> = vec!["lag_node3".into(), "lag_node1".into()];
        let per_node: Vec<&String> = per_node.iter().collect();
        let lines = metric_nodes("lag", &per_node, &b);
        let labels: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["node 1", "node 3"]);
        assert_eq!(lines[0].1, [Some(1.0), None]);
    }
}
