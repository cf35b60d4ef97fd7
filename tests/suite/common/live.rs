//! brokerbench's live figures (`--metrics-listen`), scraped during a run and checked with
//! promtool and against the Grafana dashboard's queries.

use std::time::Duration;

use super::*;

/// `promtool check metrics` (Debian's prometheus package) reports no problem in a scrape.
pub fn promtool_finds_nothing(text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/setup installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics:\n{report}\nscrape:\n{text}"
    );
}

/// Every brokerbench metric the Grafana dashboard queries is in the scrape, except those of
/// another broker family (`other_family`).
pub fn dashboard_metrics_exist(text: &str, other_family: &[&str]) -> Vec<String> {
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana-dashboard.json"
    ))
    .unwrap();
    let served: std::collections::HashSet<String> = brokerbench_metrics::parse(text)
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut used = Vec::new();
    for (i, _) in dashboard.match_indices("brokerbench_") {
        let name: String = dashboard[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !used.contains(&name) {
            used.push(name);
        }
    }
    assert!(used.len() > 10, "{used:?}");
    for name in &used {
        if other_family.contains(&name.as_str()) {
            continue;
        }
        assert!(
            served.contains(name),
            "the dashboard queries {name}, which the scrape lacks:\n{text}"
        );
    }
    used
}

/// A short run at 2000 msg/s serving live figures, scraped 2 s into its measurement (counted
/// from the run's own rows); `extra` are more arguments of the run.
pub fn scrape_live_run(extra: &[&str]) -> (Run, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let url = format!("http://{address}/metrics");
    let dir = tempfile::tempdir().unwrap();
    let folder = results_folder(dir.path());
    let scraper = std::thread::spawn(move || {
        wait_for_measured_seconds(&folder, 2);
        brokerbench_metrics::scrape(&url, Duration::from_secs(2))
    });
    let sets = short("2000", 4);
    let mut args = vec!["--metrics-listen", address.as_str()];
    args.extend_from_slice(extra);
    let run = run_in(dir, &with_sets(&sets, &args));
    let text = scraper.join().unwrap().expect("scraped during the run");
    (run, text)
}
