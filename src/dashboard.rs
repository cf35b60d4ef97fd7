//! `--dashboard`: the live page of a run or study (brokerbench_report::Dashboard) served by
//! the small HTTP server the live metrics use, on loopback unless asked otherwise.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use brokerbench_metrics::{MetricsServer, Page, Pages};
use brokerbench_report::Dashboard;

use crate::cli::DashboardArgs;
use crate::BadInput;

/// A dashboard being served; the server stops when this is dropped.
pub struct LiveDashboard {
    pub dashboard: Arc<Dashboard>,
    _server: MetricsServer,
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
    if args.dashboard_public {
        eprintln!("warning: the dashboard listens on {url}, not only on loopback");
    }
    eprintln!("live dashboard: {url}");
    if args.open {
        open_in_browser(&url);
    }
    Ok(Some(LiveDashboard {
        dashboard,
        _server: server,
    }))
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
