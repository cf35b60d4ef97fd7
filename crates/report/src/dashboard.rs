//! The live dashboard (`--dashboard`): the report of a run or study folder, built from the
//! folder as it is being written by the same code that writes report.html (so the live page
//! and the file never disagree), with a banner saying what is running and a script that
//! fetches the page again every second and redraws it. The server is the caller's; this
//! answers its requests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::html::{report_of, Written, REPORT_FILE};

const LIVE_JS: &str = include_str!("../assets/live.js");

/// A page built less than this long ago is served again: several viewers cost one build a
/// second, not one each.
const FRESH_FOR: Duration = Duration::from_millis(900);

/// A page is built again only after this many times what its last build took, so that
/// building costs at most 1% of a core however long the run (a page of a long run takes
/// longer to build, and is then redrawn less often than every second).
const BUILDS_APART: u32 = 100;

/// After the end, how long [`Dashboard::end`] waits for a viewer's next fetch to be answered,
/// so that an open page shows the final report before the process exits (viewers fetch a
/// second after their last answer).
const LAST_FETCH_WITHIN: Duration = Duration::from_secs(3);

/// What a dashboard serves and what it says about it.
pub struct Dashboard {
    /// The run or study folder.
    dir: PathBuf,
    state: Mutex<State>,
    /// Held while a page is built, so that viewers asking at the same moment wait for one
    /// build instead of each making their own.
    building: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// The last page built for each path, and when.
    built: Vec<(String, Instant, Arc<Vec<u8>>)>,
    /// A study's running run: what it is and its folder.
    running: Option<(String, PathBuf)>,
    /// Set at the end: what the banner says then.
    /// What the end page says, and whether the run or study ended well.
    ended: Option<(String, bool)>,
    /// When a page was last asked for, and when one was last built or taken from the cache
    /// after the end.
    last_fetch: Option<Instant>,
    /// How long the last build took.
    build_took: Duration,
    /// Counts the changes of what the banner says (a study's next run, the end): a page begun
    /// before one is not kept after it.
    generation: u64,
    /// Whether a page saying the end was given to a viewer (what [`Dashboard::end`] waits for).
    answered_after_end: bool,
}

impl Dashboard {
    /// The dashboard of the run or study folder `dir`.
    pub fn new(dir: &Path) -> Arc<Dashboard> {
        Arc::new(Dashboard {
            dir: dir.to_path_buf(),
            state: Mutex::new(State::default()),
            building: Mutex::new(()),
        })
    }

    /// The answer to a GET of `path`: `/` is the folder's live report; for a study, `/run` is
    /// the running run's, and `/runs/NAME/report.html` a finished run's report (the study
    /// page links them). `None` for anything else (404).
    pub fn respond(&self, path: &str) -> Option<(&'static str, Vec<u8>)> {
        match path {
            "/" | "/run" => {
                let page = self.page(path)?;
                Some(("text/html; charset=utf-8", page.as_ref().clone()))
            }
            _ => self.written_report(path),
        }
    }

    /// A study run's report.html as written, for `/runs/NAME/report.html` where NAME is one
    /// folder name (letters, digits, `-`, `_`): nothing else in or outside the folder is served.
    fn written_report(&self, path: &str) -> Option<(&'static str, Vec<u8>)> {
        let name = path.strip_prefix("/runs/")?.strip_suffix("/report.html")?;
        let safe = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !safe {
            return None;
        }
        let body = std::fs::read(self.dir.join("runs").join(name).join(REPORT_FILE)).ok()?;
        Some(("text/html; charset=utf-8", body))
    }

    /// A study says which run it started (`what`: its cell and repetition) and where that run
    /// writes.
    pub fn running(&self, what: String, run_folder: PathBuf) {
        let mut state = self.lock();
        state.running = Some((what, run_folder));
        state.changed();
    }

    /// The run or study is over (`good`: as planned): the page says so and where its report
    /// is. Waits (at most 3 s) for a viewer who fetched in the last few seconds to be given
    /// the final page.
    pub fn end(&self, outcome: &str, good: bool) {
        let ended_at = Instant::now();
        let recently_viewed = {
            let mut state = self.lock();
            state.ended = Some((outcome.to_string(), good));
            state.changed();
            state
                .last_fetch
                .is_some_and(|t| ended_at.duration_since(t) < 3 * FRESH_FOR)
        };
        while recently_viewed && ended_at.elapsed() < LAST_FETCH_WITHIN {
            if self.lock().answered_after_end {
                // The server, when dropped, lets the answer being written finish.
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether [`Dashboard::end`] was called.
    pub fn has_ended(&self) -> bool {
        self.lock().ended.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The page at `path`, built again when the last one is older than
    /// [`State::refresh_every`] or the banner changed since; one build at a time.
    fn page(&self, path: &str) -> Option<Arc<Vec<u8>>> {
        let now = Instant::now();
        self.lock().last_fetch = Some(now);
        let seen = self.cached(path, now)?;
        if let Some(page) = seen.page {
            self.answered(&seen.banner);
            return Some(page);
        }
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        // Another viewer's build may have finished while this one waited for it.
        let Seen { banner, dir, page } = self.cached(path, now)?;
        let page = page.unwrap_or_else(|| {
            let began = Instant::now();
            let page = Arc::new(live_page(&dir, &banner).into_bytes());
            let mut state = self.lock();
            state.build_took = began.elapsed();
            // A page begun before a study's next run or the end says what is no longer so.
            if banner.generation == state.generation {
                state.built.retain(|(p, _, _)| p != path);
                state
                    .built
                    .push((path.to_string(), Instant::now(), page.clone()));
            }
            page
        });
        self.answered(&banner);
        Some(page)
    }

    /// The banner for `path` now, the folder it shows (read together, so that a study's
    /// next run cannot come between them), and its page when one was built recently enough
    /// before `asked`. `None` for `/run` when no run has started.
    fn cached(&self, path: &str, asked: Instant) -> Option<Seen> {
        let state = self.lock();
        let dir = match path {
            "/run" => state.running.as_ref()?.1.clone(),
            _ => self.dir.clone(),
        };
        let fresh_for = state.refresh_every();
        let cached = state
            .built
            .iter()
            .find(|(p, at, _)| p == path && asked.saturating_duration_since(*at) < fresh_for)
            .map(|(_, _, page)| page.clone());
        Some(Seen {
            banner: self.banner(&state, path),
            dir,
            page: cached,
        })
    }

    /// Takes note of a final page given to a viewer, which [`Dashboard::end`] waits for.
    fn answered(&self, banner: &Banner) {
        if banner.live == "ended" {
            self.lock().answered_after_end = true;
        }
    }

    /// What the top of the page says: running or ended, and for a study which run is going.
    fn banner(&self, state: &State, path: &str) -> Banner {
        let report = self.dir.join(REPORT_FILE).display().to_string();
        if let Some((outcome, good)) = &state.ended {
            return Banner {
                live: "ended",
                class: if *good { "good" } else { "warn" },
                text: format!("{outcome} The final report is written to {report}."),
                link: None,
                generation: state.generation,
            };
        }
        let running = state.running.as_ref().map(|(what, _)| what.as_str());
        let every = match state.refresh_every() {
            FRESH_FOR => "every second".to_string(),
            slower => format!(
                "every {:.0} s (each page takes {} ms to build, and building is kept under 1% of a core)",
                slower.as_secs_f64().ceil(),
                state.build_took.as_millis()
            ),
        };
        let text = match (path, running) {
            ("/run", Some(what)) => format!("Live: {what}, updated {every}."),
            (_, Some(what)) => format!("Live: running {what}; updated {every}."),
            _ => format!("Live: the run is going; updated {every}."),
        };
        let link = match (path, running) {
            ("/run", _) => Some(("/", "the study")),
            (_, Some(_)) => Some(("/run", "the running run's charts")),
            _ => None,
        };
        Banner {
            live: "running",
            class: "warn",
            text,
            link,
            generation: state.generation,
        }
    }
}

impl State {
    /// How long a built page is served before it is built again.
    fn refresh_every(&self) -> Duration {
        FRESH_FOR.max(self.build_took * BUILDS_APART)
    }

    /// The banner says something new: the pages built so far are not served again.
    fn changed(&mut self) {
        self.generation += 1;
        self.built.clear();
    }
}

/// What [`Dashboard::cached`] found for a path.
struct Seen {
    banner: Banner,
    /// The folder the page shows.
    dir: PathBuf,
    /// A page built recently enough.
    page: Option<Arc<Vec<u8>>>,
}

/// The line at the top of a live page.
struct Banner {
    /// `running` or `ended`: the script stops fetching at `ended`.
    live: &'static str,
    /// The banner's colour: `good` once ended as planned, else `warn`.
    class: &'static str,
    text: String,
    link: Option<(&'static str, &'static str)>,
    /// [`State::generation`] when it was made.
    generation: u64,
}

impl Banner {
    fn html(&self) -> String {
        let link = self.link.map_or(String::new(), |(href, what)| {
            format!(" <a href=\"{href}\">Show {what}.</a>")
        });
        format!(
            "<p class=\"banner {}\" id=\"live-banner\" data-live=\"{}\">{}{link}</p>\n",
            self.class,
            self.live,
            crate::html::esc(&self.text)
        )
    }
}

/// The report of `dir` as it is now, with the banner at the top of its `<main>` and the
/// script that keeps it live; a page that says why when the folder cannot be read yet.
fn live_page(dir: &Path, banner: &Banner) -> String {
    // Once it has ended, the page is the report as report.html has it.
    let written = match banner.live {
        "ended" => Written::Final,
        _ => Written::Live,
    };
    let html = report_of(dir, written).unwrap_or_else(|e| {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>brokerbench</title></head>\n<body>\n<main>\n<p>No report yet: {}</p>\n</main>\n\
<script type=\"application/json\" id=\"report-data\">{{}}</script>\n</body></html>\n",
            crate::html::esc(&e.to_string())
        )
    });
    let html = html.replacen("<main>\n", &format!("<main>\n{}", banner.html()), 1);
    match html.rfind("</body>") {
        Some(end) => format!(
            "{}<script>{LIVE_JS}</script>\n{}",
            &html[..end],
            &html[end..]
        ),
        None => html,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_not_written_yet_is_said_and_the_page_keeps_fetching() {
        let dir = tempfile::tempdir().unwrap();
        let dashboard = Dashboard::new(dir.path());
        let (kind, body) = dashboard.respond("/").unwrap();
        assert_eq!(kind, "text/html; charset=utf-8");
        let page = String::from_utf8(body).unwrap();
        assert!(page.contains("No report yet:"), "{page}");
        assert!(page.contains("data-live=\"running\""), "{page}");
        assert!(page.contains("fetch("), "the live script is in the page");
        assert!(dashboard.respond("/run").is_none(), "no study run yet");
        assert!(dashboard.respond("/other").is_none());
    }

    #[test]
    fn only_the_reports_of_the_study_runs_are_served_as_files() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("runs/c001-r1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join(REPORT_FILE), "<p>run</p>").unwrap();
        std::fs::write(dir.path().join("runs/secret"), "no").unwrap();
        let dashboard = Dashboard::new(dir.path());
        let served = dashboard.respond("/runs/c001-r1/report.html").unwrap();
        assert_eq!(served.1, b"<p>run</p>");
        for path in [
            "/runs/../runs/c001-r1/report.html",
            "/runs/c001-r1/../secret",
            "/runs//report.html",
            "/runs/c001-r1/manifest.json",
            "/runs/c002-r1/report.html",
        ] {
            assert!(dashboard.respond(path).is_none(), "{path}");
        }
    }

    #[test]
    fn pages_are_built_at_most_once_a_second_and_the_end_is_said_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let dashboard = Dashboard::new(dir.path());
        let first = dashboard.respond("/").unwrap().1;
        std::fs::write(dir.path().join("manifest.json"), "{}").unwrap();
        assert_eq!(dashboard.respond("/").unwrap().1, first, "cached");
        // A viewer fetched just now: the end waits for its next fetch to be answered.
        let ending = {
            let dashboard = dashboard.clone();
            std::thread::spawn(move || {
                let began = Instant::now();
                dashboard.end("The run ended.", true);
                began.elapsed()
            })
        };
        let last = loop {
            let page = String::from_utf8(dashboard.respond("/").unwrap().1).unwrap();
            if !page.contains("data-live=\"running\"") {
                break page;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(last.contains("data-live=\"ended\""), "{last}");
        assert!(last.contains("The run ended. The final report is written to"));
        assert!(last.contains("class=\"banner good\""), "{last}");
        assert!(
            ending.join().unwrap() < LAST_FETCH_WITHIN,
            "it did not wait 3 s"
        );
    }

    #[test]
    fn an_end_that_went_wrong_is_not_shown_as_good() {
        let dir = tempfile::tempdir().unwrap();
        let dashboard = Dashboard::new(dir.path());
        assert!(!dashboard.has_ended());
        dashboard.end("The run failed.", false);
        assert!(dashboard.has_ended());
        let page = String::from_utf8(dashboard.respond("/").unwrap().1).unwrap();
        assert!(
            page.contains("class=\"banner warn\" id=\"live-banner\" data-live=\"ended\""),
            "{page}"
        );
    }

    #[test]
    fn a_page_slow_to_build_is_built_a_hundred_times_its_cost_apart_and_the_banner_says_so() {
        let mut state = State {
            build_took: Duration::from_millis(4),
            ..State::default()
        };
        assert_eq!(state.refresh_every(), FRESH_FOR);
        state.build_took = Duration::from_millis(60);
        assert_eq!(state.refresh_every(), Duration::from_secs(6));
        let dashboard = Dashboard::new(Path::new("/nonexistent"));
        let banner = dashboard.banner(&state, "/");
        assert!(
            banner
                .text
                .contains("updated every 6 s (each page takes 60 ms to build"),
            "{}",
            banner.text
        );
    }

    #[test]
    fn a_study_names_its_running_run_and_serves_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let dashboard = Dashboard::new(dir.path());
        let run = dir.path().join("runs/1");
        dashboard.running("cell 1 of 2 (rate=100), repetition 1 of 1".into(), run);
        let study = String::from_utf8(dashboard.respond("/").unwrap().1).unwrap();
        assert!(study.contains("running cell 1 of 2 (rate=100), repetition 1 of 1"));
        assert!(study.contains("href=\"/run\""), "{study}");
        let run = String::from_utf8(dashboard.respond("/run").unwrap().1).unwrap();
        assert!(run.contains("href=\"/\""), "{run}");
    }
}
