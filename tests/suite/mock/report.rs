//! report.html opened from `file://` in headless Chromium (Debian's package): no JavaScript
//! or console error, every chart drawn with data, headline numbers equal to summary.json;
//! the live dashboard. The runs are on the in-memory mock family. Screenshots of each kind of
//! report are saved under target/report-screenshots/.

use crate::cdp;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{brokerbench, serial, write};

const QUICKSTART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/quickstart.yaml");

fn chromium() -> PathBuf {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!("Debian's chromium is needed for the report tests: scripts/setup installs it (apt-get install chromium)");
}

/// What the browser made of a page: the DOM after the scripts ran, and its console output.
struct Page {
    dom: String,
    console: String,
}

fn open(file: &Path, screenshot: &str) -> Page {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", file.canonicalize().unwrap().display());
    let common = |cmd: &mut Command| {
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--window-size=1280,3000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    };
    let mut dump = Command::new(chromium());
    common(&mut dump);
    let out = dump
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs");
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut shot = Command::new(chromium());
    common(&mut shot);
    let shot_out = shot
        .arg(format!("--screenshot={}", shots.join(screenshot).display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot_out.status.success(),
        "screenshot of {}",
        file.display()
    );
    Page {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An attribute of the first element whose opening tag contains `marker`.
fn attribute(dom: &str, marker: &str, name: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let tag_start = dom[..at].rfind('<')?;
    let tag_end = at + dom[at..].find('>')?;
    let tag = &dom[tag_start..tag_end];
    let key = format!("{name}=\"");
    let i = tag.find(&key)? + key.len();
    Some(tag[i..i + tag[i..].find('"')?].to_string())
}

/// Checks the page as a whole and every chart in it; returns the charts' ids.
fn check_page(page: &Page, what: &str) -> Vec<String> {
    let status = attribute(&page.dom, "<body", "data-status").unwrap_or_default();
    assert_eq!(status, "ok", "{what}: the page's scripts failed: {status}");
    for line in page.console.lines() {
        assert!(
            !(line.contains("CONSOLE") && (line.contains("Uncaught") || line.contains("Error"))),
            "{what}: console error: {line}"
        );
    }
    let mut ids = Vec::new();
    for (i, _) in page.dom.match_indices("class=\"chart\"") {
        let tag_start = page.dom[..i].rfind('<').unwrap();
        let tag = &page.dom[tag_start..i + page.dom[i..].find('>').unwrap()];
        let get = |name: &str| -> String {
            let key = format!("{name}=\"");
            tag.find(&key)
                .map(|j| {
                    let v = &tag[j + key.len()..];
                    v[..v.find('"').unwrap()].to_string()
                })
                .unwrap_or_default()
        };
        let id = get("id");
        let points: usize = get("data-points").parse().unwrap_or(0);
        let width: f64 = get("data-width").parse().unwrap_or(0.0);
        let height: f64 = get("data-height").parse().unwrap_or(0.0);
        assert!(points > 0, "{what}: chart {id} drew no data points");
        assert!(
            width > 100.0 && height > 50.0,
            "{what}: chart {id} is {width}×{height}"
        );
        ids.push(id);
    }
    let drawn: usize = attribute(&page.dom, "<body", "data-charts")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert_eq!(
        drawn,
        ids.len(),
        "{what}: every chart placeholder was drawn"
    );
    assert!(page.dom.contains("<canvas"), "{what}: no canvas");
    ids
}

/// A number as the page shows it ("6.21 ms", "50.0K", "12.5 MB", "3") back to a value.
fn parse_shown(text: &str) -> f64 {
    let t = text.trim();
    let (number, unit) = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .map_or((t, ""), |i| (&t[..i], t[i..].trim()));
    let n: f64 = number
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {text}"));
    n * match unit {
        "" => 1.0,
        "ns" => 1.0,
        "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "K" => 1e3,
        "M" => 1e6,
        "MB" => 1e6,
        other => panic!("unit {other} in {text}"),
    }
}

/// The text of the headline table's header cells.
fn header_cells(dom: &str) -> Vec<String> {
    let start = dom.find("id=\"headline\"").expect("the headline table");
    let head = &dom[start..start + dom[start..].find("</thead>").unwrap()];
    let cells: Vec<&str> = head.split("</th>").collect();
    cells[..cells.len() - 1]
        .iter()
        .map(|piece| piece[piece.rfind('>').unwrap() + 1..].to_string())
        .collect()
}

fn value_at(doc: &serde_json::Value, path: &str) -> f64 {
    path.split('.')
        .fold(doc, |n, p| &n[p])
        .as_f64()
        .unwrap_or_else(|| panic!("{path}"))
}

fn short_run(dir: &Path, name: &str, rate: u32) -> PathBuf {
    let out = dir.join(name);
    let output = brokerbench()
        .args([
            "run",
            QUICKSTART,
            "--quiet",
            "--set",
            "driver=mock",
            "--out",
        ])
        .arg(&out)
        .args([
            "--set",
            &format!("rate={rate}"),
            "--set",
            "warmup=0s",
            "--set",
            "duration=3s",
            "--set",
            "drain_timeout=5s",
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

#[test]
fn run_study_search_and_comparison_reports_render_in_chromium() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();

    // A run: written at the end of the run, every chart drawn, headline numbers as summary.json.
    // Both folders called `out`, as `--out` makes them: the comparison must still tell them apart.
    let a = short_run(dir.path(), "a/out", 5000);
    let report = a.join("report.html");
    assert!(report.exists(), "the run wrote report.html");
    let page = open(&report, "run.png");
    let ids = check_page(&page, "run report");
    for id in ["rates", "latency", "backlog", "cpu", "spectrum"] {
        assert!(
            ids.iter().any(|i| i == &format!("chart-{id}")),
            "run report has {id}: {ids:?}"
        );
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("summary.json")).unwrap()).unwrap();
    let mut checked = 0;
    for (i, _) in page.dom.match_indices("class=\"card\"") {
        let rest = &page.dom[page.dom[..i].rfind('<').unwrap()..];
        let key = attribute(rest, "class=\"card\"", "data-key").unwrap();
        let value: f64 = attribute(rest, "class=\"card\"", "data-value")
            .unwrap()
            .parse()
            .unwrap();
        let truth = value_at(&summary, &key);
        assert!(
            (value - truth).abs() <= 1e-9 * truth.abs().max(1.0),
            "{key}: page {value}, summary {truth}"
        );
        let shown_start = rest.find("class=\"value\">").unwrap() + "class=\"value\">".len();
        let shown = &rest[shown_start..shown_start + rest[shown_start..].find('<').unwrap()];
        let parsed = parse_shown(shown);
        assert!(
            (parsed - truth).abs() <= 0.01 * truth.abs() + 0.01,
            "{key}: shown {shown}, summary {truth}"
        );
        checked += 1;
    }
    assert!(checked >= 8, "{checked} headline numbers checked");
    assert!(a.join("window.hlog").exists());

    // `brokerbench report` rebuilds it; a comparison of two runs.
    let b = short_run(dir.path(), "b/out", 8000);
    let out = brokerbench().arg("report").arg(&a).output().unwrap();
    assert!(out.status.success());
    let comparison = dir.path().join("comparison.html");
    let out = brokerbench()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&comparison)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = open(&comparison, "comparison.png");
    let ids = check_page(&page, "comparison report");
    assert!(ids.iter().any(|i| i == "chart-spectrum-publish"), "{ids:?}");
    assert!(page.dom.contains("×)"), "ratios to the first run");
    // Each run named by the setting that differs, in the table's header and every legend.
    let charts = ids.len();
    assert_eq!(
        header_cells(&page.dom),
        ["number", "rate=5000", "rate=8000"]
    );
    for label in ["rate=5000", "rate=8000"] {
        let legends = page
            .dom
            .matches(&format!("class=\"u-label\">{label}<"))
            .count();
        assert_eq!(legends, charts, "{label} in every chart's legend");
    }
    assert!(
        !page.dom.contains("class=\"u-label\">out<"),
        "no legend says `out`"
    );
    // The terminal table names its columns the same way.
    let out = brokerbench()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let header = text.lines().find(|l| l.starts_with("number")).unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["number", "rate=5000", "rate=8000"],
        "{text}"
    );
    // Names given with --label, one per folder.
    let labelled = dir.path().join("labelled.html");
    let out = brokerbench()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .args(["--label", "slow", "--label", "fast", "-o"])
        .arg(&labelled)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = open(&labelled, "comparison-labelled.png");
    check_page(&page, "labelled comparison report");
    assert_eq!(header_cells(&page.dom), ["number", "slow", "fast"]);
    assert_eq!(page.dom.matches("class=\"u-label\">fast<").count(), charts);

    // A study: 2 × 2 grid, 2 repetitions; charts against the first axis with CI whiskers.
    let file = write(
        dir.path(),
        "grid.yaml",
        &format!("name: grid\nworkload: {QUICKSTART}\ndriver: {{driver: mock}}\nset: {{warmup: 0s, duration: 1s, drain_timeout: 5s}}\naxes:\n  rate: [2000, 4000]\n  stamps_acknowledgements: [false, true]\nrepetitions: 2\n"),
    );
    let study = dir.path().join("study");
    let out = brokerbench()
        .arg("study")
        .arg(&file)
        .arg("--out")
        .arg(&study)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let page = open(&study.join("report.html"), "study.png");
    let ids = check_page(&page, "study report");
    assert!(ids.len() >= 4, "{ids:?}");
    assert!(page.dom.contains("id=\"cells\""), "the cells table");
    assert!(
        page.dom.contains("runs/c001-r1/report.html"),
        "links to the runs' reports"
    );

    // A search: offered against achieved and latency, with the found rate marked.
    let file = write(
        dir.path(),
        "find.yaml",
        &format!("name: find\nworkload: {QUICKSTART}\ndriver: {{driver: mock, capacity: 30000}}\nset: {{rate: find}}\nfind: {{start: 20000, growth: 4, precision: 50%, max_steps: 3}}\n"),
    );
    let search = dir.path().join("search");
    let out = brokerbench()
        .arg("study")
        .arg(&file)
        .args([
            "--quick",
            "--set",
            "warmup=0s",
            "--set",
            "duration=1s",
            "--out",
        ])
        .arg(&search)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1));
    let page = open(&search.join("report.html"), "search.png");
    let ids = check_page(&page, "search report");
    assert!(ids.iter().any(|i| i == "chart-search-rate-0"), "{ids:?}");
    assert!(ids.iter().any(|i| i == "chart-search-latency-0"), "{ids:?}");
}

/// A brokerbench command serving `--dashboard`, and the address it printed.
struct Served {
    child: Child,
    url: String,
    /// What it printed on stderr after the address.
    said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Served {
    fn start(args: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_brokerbench"))
            .args(args)
            .arg("--dashboard")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("live dashboard: ").map(String::from))
            .expect("the dashboard's address is printed");
        // Read as it comes, which also keeps the pipe from filling.
        let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = said.clone();
        std::thread::spawn(move || {
            lines
                .map_while(Result::ok)
                .for_each(|line| kept.lock().unwrap().push(line))
        });
        Served { child, url, said }
    }

    /// Waits (at most 120 s) for the command to exit; whether it succeeded.
    fn wait(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("brokerbench did not exit within 120 s");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rates chart's uPlot on a report page.
const RATES: &str = "window.brokerbenchReport.plot('chart-rates')";

/// Waits (at most 30 s) for the JavaScript `condition` to hold in the page.
fn wait_for(browser: &mut cdp::Browser, condition: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while browser.eval(condition) != serde_json::Value::Bool(true) {
        assert!(
            Instant::now() < deadline,
            "{condition} did not hold within 30 s"
        );
        browser.watch(Duration::from_millis(200));
    }
}

/// The data points the page's charts hold now, and how many updates it applied.
fn points_and_updates(browser: &mut cdp::Browser) -> (u64, u64) {
    let counts = browser.eval(
        "[Array.from(document.querySelectorAll('.chart')).reduce((n, c) => n + Number(c.dataset.points || 0), 0), \
         Number(document.body.dataset.updates)]",
    );
    (counts[0].as_u64().unwrap(), counts[1].as_u64().unwrap())
}

/// Watches the page until it has drawn more points in more updates than `before` (a busy host
/// may hold a redraw back for seconds), at most `within`: what it drew by then.
fn grown(browser: &mut cdp::Browser, before: (u64, u64), within: Duration) -> (u64, u64) {
    let deadline = std::time::Instant::now() + within;
    loop {
        browser.watch(Duration::from_millis(500));
        let now = points_and_updates(browser);
        if (now.0 > before.0 && now.1 > before.1) || std::time::Instant::now() >= deadline {
            return now;
        }
    }
}

fn shots() -> PathBuf {
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

#[test]
fn the_live_dashboard_grows_during_a_run_and_ends_on_its_report() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live");
    // The browser first, so that its start does not eat into the run.
    let mut browser = cdp::Browser::start(&chromium(), 1280, 2400);
    let mut run = Served::start(&[
        "run",
        QUICKSTART,
        "--quiet",
        "--set",
        "driver=mock",
        "--set",
        "rate=2000",
        "--set",
        "warmup=2s",
        "--set",
        "duration=15s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(run.url.starts_with("http://127.0.0.1:"), "{}", run.url);
    browser.open(&run.url);
    // The charts come with the run's first rows (a broker just started may take seconds).
    wait_for(
        &mut browser,
        &format!("!!(window.brokerbenchReport && {RATES})"),
    );
    // While the run goes on the page says so, with headline cards so far: asked as the first
    // rows come, not after the checks below, which a busy host may stretch past the run's end.
    wait_for(
        &mut browser,
        "document.querySelectorAll('.card.so-far').length >= 4",
    );
    assert_eq!(browser.eval("document.body.dataset.live"), "running");
    browser.watch(Duration::from_secs(2));
    let first = points_and_updates(&mut browser);
    let latency_max = "window.brokerbenchReport.plot('chart-latency').scales.x.max";
    let first_until = browser.eval(latency_max).as_f64();
    let first_until = first_until.expect("the latency chart's x range is set");
    browser.screenshot(&shots().join("dashboard-1.png"));
    // A zoom and a series hidden from the legend outlive the page's redraws.
    browser.eval(&format!(
        "(() => {{ const p = {RATES}; p.setSeries(1, {{ show: false }}); p.setScale('x', {{ min: 1, max: 3 }}); return 0; }})()"
    ));
    // Ten viewers at once are all answered.
    let viewers: Vec<_> = (0..10)
        .map(|_| {
            let url = run.url.clone();
            std::thread::spawn(move || ureq_get(&url))
        })
        .collect();
    for viewer in viewers {
        assert_eq!(viewer.join().unwrap(), 200);
    }
    let second = grown(&mut browser, first, Duration::from_secs(30));
    browser.screenshot(&shots().join("dashboard-2.png"));
    assert!(
        second.0 > first.0 && second.1 > first.1,
        "the same page drew more points by itself: {first:?} then {second:?}"
    );
    // A chart nobody zoomed shows the new seconds (each chart takes them as they come).
    wait_for(&mut browser, &format!("{latency_max} > {first_until}"));
    let view = browser.eval(&format!(
        "(() => {{ const p = {RATES}; return [p.scales.x.min, p.scales.x.max, p.series[1].show]; }})()"
    ));
    assert_eq!(
        (view[0].as_f64(), view[1].as_f64(), view[2].as_bool()),
        (Some(1.0), Some(3.0), Some(false)),
        "the rates chart kept its zoom and hidden series: {view}"
    );
    assert!(run.wait(), "the run succeeded");
    assert_dashboard_cost_stated(&run, 11);
    browser.watch(Duration::from_secs(2));
    assert_eq!(
        browser.eval("document.body.dataset.live"),
        "ended",
        "the page took the final report before brokerbench exited"
    );
    assert_eq!(browser.eval("document.body.dataset.status"), "ok");
    browser.screenshot(&shots().join("dashboard-end.png"));
    // The headline cards on the page at the end are summary.json's numbers.
    let cards = browser.eval(
        "Array.from(document.querySelectorAll('.card')).map(c => [c.dataset.key, Number(c.dataset.value)])",
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let cards = cards.as_array().unwrap();
    assert!(cards.len() >= 8, "{cards:?}");
    for card in cards {
        let key = card[0].as_str().unwrap();
        let truth = value_at(&summary, key);
        let value = card[1].as_f64().unwrap();
        assert!(
            (value - truth).abs() <= 1e-9 * truth.abs().max(1.0),
            "{key}: page {value}, summary {truth}"
        );
    }
    assert!(browser.errors.is_empty(), "{:?}", browser.errors);
}

/// The line brokerbench printed as it exited states what the dashboard's threads used: at least
/// `requests` answered (the viewers' and the page's own fetches), with some CPU.
fn assert_dashboard_cost_stated(run: &Served, requests: u64) {
    // The reader thread may still be taking the last lines from the pipe.
    let deadline = Instant::now() + Duration::from_secs(5);
    let line = loop {
        let said = run.said.lock().unwrap().clone();
        let found = said
            .iter()
            .find(|l| l.contains(" requests answered with "))
            .cloned();
        match found {
            Some(line) => break line,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => panic!("no dashboard cost line in {said:?}"),
        }
    };
    let number = |after: &str| {
        line.split(after)
            .nth(1)
            .and_then(|rest| rest.split(' ').next()?.parse::<f64>().ok())
    };
    let answered = number("live dashboard: ").expect(&line);
    let cpu = number(" answered with ").expect(&line);
    assert!(answered >= requests as f64 && cpu > 0.0, "{line}");
}

/// The status of a GET of `url`, over a plain TCP connection.
fn ureq_get(url: &str) -> u16 {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET / HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply[9..12].parse().unwrap()
}

#[test]
fn a_study_dashboard_shows_the_first_cell_while_the_second_runs() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "live.yaml",
        &format!("name: live\nworkload: {QUICKSTART}\ndriver: {{driver: mock}}\nset: {{warmup: 1s, duration: 6s, drain_timeout: 5s}}\naxes:\n  rate: [1000, 2000]\n"),
    );
    let study_dir = dir.path().join("study");
    let mut browser = cdp::Browser::start(&chromium(), 1280, 2000);
    let mut study = Served::start(&[
        "study",
        file.to_str().unwrap(),
        "--out",
        study_dir.to_str().unwrap(),
    ]);
    browser.open(&study.url);
    let deadline = Instant::now() + Duration::from_secs(90);
    let seen = loop {
        assert!(Instant::now() < deadline, "cell 1's result never showed");
        browser.watch(Duration::from_millis(300));
        let seen = browser.eval(
            "[document.getElementById('live-banner').textContent, \
              Array.from(document.querySelectorAll('#cells tbody tr')).map(r => r.textContent), \
              document.body.dataset.live]",
        );
        let banner = seen[0].as_str().unwrap();
        if banner.contains("running cell 2") && !seen[1].as_array().unwrap().is_empty() {
            break seen;
        }
        assert_ne!(
            seen[2], "ended",
            "the study ended before its page showed cell 1 with cell 2 running: {seen}"
        );
    };
    let rows = seen[1].as_array().unwrap();
    assert!(rows[0].as_str().unwrap().contains("1000"), "{seen}");
    assert_eq!(browser.eval("document.body.dataset.status"), "ok");
    // The running run's own live page, and the finished run's report, linked from the page.
    let status = |browser: &mut cdp::Browser, path: &str| {
        browser.eval(&format!("fetch('{path}').then(r => r.status)"))
    };
    assert_eq!(status(&mut browser, "/run"), 200);
    assert_eq!(status(&mut browser, "/runs/c001-r1/report.html"), 200);
    browser.screenshot(&shots().join("dashboard-study.png"));
    assert!(study.wait(), "the study succeeded");
    assert!(browser.errors.is_empty(), "{:?}", browser.errors);
}
