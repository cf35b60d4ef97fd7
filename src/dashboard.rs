//! `--dashboard`: the live page of a run or study (brokerbench_report::Dashboard) served by
//! the small HTTP server the live metrics use, on loopback unless asked otherwise.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use brokerbench_metrics::{MetricsServer, Page, Pages};
use brokerbench_report::Dashboard;

use crate::cli::DashboardArgs;
use crate::BadInput;

/// A dashboard being served; the server stops when this is dropped.
pub struct LiveDashboard {
    pub dashboard: Arc<Dashboard>,
    server: MetricsServer,
    /// When it began listening: the span its CPU is stated over.
    began: Instant,
}

/// Refuses an address that is not loopback unless `--dashboard-public` asks for it: checked
/// before anything starts.
pub fn check(args: &DashboardArgs) -> anyhow::Result<()> {
    match args.dashboard {
        Some(address) if !address.ip().is_loopback() && !args.dashboard_public => {
            Err(BadInput(format!(
                "--dashboard={address}: not a loopback address, so anyone who can reach this \
                 machine would see the page; add --dashboard-public to mean it, or use \
                 --dashboard=127.0.0.1:{}",
                address.port()
            ))
            .into())
        }
        _ => Ok(()),
    }
}

/// Serves the dashboard of `folder` when asked for, prints its address (and opens it with
/// `--open`).
pub fn start(args: &DashboardArgs, folder: &Path) -> anyhow::Result<Option<LiveDashboard>> {
    let Some(address) = args.dashboard else {
        return Ok(None);
    };
    let dashboard = Dashboard::new(folder);
    let pages: Pages = {
        let dashboard = dashboard.clone();
        Arc::new(move |path: &str| {
            let (content_type, body) = dashboard.respond(path)?;
            Some(Page { content_type, body })
        })
    };
    let server = MetricsServer::serve_pages(address, pages)
        .with_context(|| format!("--dashboard={address}: cannot listen there"))?;
    let url = format!("http://{}/", server.address());
    if !address.ip().is_loopback() {
        eprintln!("warning: the dashboard listens on {url}, not only on loopback");
    }
    eprintln!("live dashboard: {url}");
    if args.open {
        open_in_browser(&url);
    }
    Ok(Some(LiveDashboard {
        dashboard,
        server,
        began: Instant::now(),
    }))
}

/// A run or study that stopped on an error before it could end its page still ends it, so a
/// viewer reads that it stopped rather than that brokerbench no longer answers.
impl Drop for LiveDashboard {
    fn drop(&mut self) {
        if !self.dashboard.has_ended() {
            self.dashboard.end(
                "brokerbench stopped on an error; the terminal says why.",
                false,
            );
        }
        // The last answers are written and counted before their cost is read.
        self.server.shutdown();
        let (answered, cpu) = self.server.answer_cost();
        eprintln!("{}", cost_line(answered, cpu, self.began.elapsed()));
    }
}

/// What the dashboard cost the process: requests answered, their threads' CPU, and that as a
/// share of one core over the time it listened.
fn cost_line(answered: u64, cpu: Duration, over: Duration) -> String {
    format!(
        "live dashboard: {answered} requests answered with {:.3} CPU-s in {:.1} s ({:.2}% of a core)",
        cpu.as_secs_f64(),
        over.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / over.as_secs_f64().max(1e-9)
    )
}

/// xdg-open, when there is one; otherwise a line saying to open the address by hand.
fn open_in_browser(url: &str) {
    let opened = std::process::Command::new("xdg-open")
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if opened.is_err() {
        eprintln!("--open: no xdg-open here; open {url} in a browser");
    }
}
