//! `brokerbench broker install|up|down|status KIND`.

use std::process::ExitCode;

use brokerbench_brokers::cluster::check_size;
use brokerbench_brokers::{settings, BrokerStatus, NodeUrl, UpOptions};
use brokerbench_family::Family;

use crate::cli::BrokerAction;
use crate::families::REGISTRY;

/// What `broker` was asked besides the action: `--tls`/`--no-tls`, `--nodes` and `--config`
/// (`up`), `--driver-file` and `--json` (`status`).
#[derive(Debug, Default, Clone)]
pub struct BrokerOptions {
    pub tls: Option<bool>,
    pub driver_file: bool,
    pub nodes: Option<u32>,
    pub config: Vec<String>,
    pub json: bool,
}

pub fn broker(
    action: BrokerAction,
    name: &str,
    options: BrokerOptions,
) -> anyhow::Result<ExitCode> {
    let family = REGISTRY.get(name).ok_or_else(|| {
        crate::BadInput(format!(
            "unknown broker `{name}`; known: {}",
            REGISTRY.names().join(", ")
        ))
    })?;
    check_options(action, name, &options)?;
    let managed = family.managed(&brokerbench_brokers::home());
    match action {
        BrokerAction::Install => println!("{}", managed.install()?),
        BrokerAction::Up => {
            if let Some(on) = options.tls {
                managed.set_tls(on)?;
            }
            if let Some(nodes) = options.nodes {
                check_size(family.name(), nodes, managed.max_nodes())?;
            }
            let settings = match options.config.is_empty() {
                true => None,
                false => Some(settings::parse(&options.config).map_err(crate::BadInput)?),
            };
            let (status, already) = match (options.nodes, settings) {
                (None, None) => managed.up()?,
                (nodes, settings) => managed.up_with(&UpOptions { nodes, settings })?,
            };
            print_up((status, already));
            for line in managed.endpoints() {
                println!("  {line}");
            }
        }
        BrokerAction::Down => {
            let running = managed
                .status()?
                .map_or(0, |s| s.nodes.iter().filter(|n| n.up).count());
            return down(name, managed.down()?, running);
        }
        BrokerAction::Status if options.driver_file => match managed.status()? {
            Some(status) => print!("{}", managed.driver_file(&status)?),
            None => {
                eprintln!("{name}: not running (start it with `brokerbench broker up {name}`)");
                return Ok(ExitCode::from(1));
            }
        },
        BrokerAction::Status if options.json => return status_json(name, managed.status()?),
        BrokerAction::Status => {
            let code = status(name, managed.status()?)?;
            if managed.status()?.is_some() {
                for line in managed.endpoints() {
                    println!("  {line}");
                }
            }
            return Ok(code);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Each option goes with one action: said before anything is touched.
fn check_options(action: BrokerAction, name: &str, options: &BrokerOptions) -> anyhow::Result<()> {
    let up = matches!(action, BrokerAction::Up);
    let status = matches!(action, BrokerAction::Status);
    let misplaced = if options.tls.is_some() && !up {
        Some(format!(
            "--tls and --no-tls go with `up`: `brokerbench broker up {name} --tls`"
        ))
    } else if options.nodes.is_some() && !up {
        Some(format!(
            "--nodes goes with `up`: `brokerbench broker up {name} --nodes 3`"
        ))
    } else if !options.config.is_empty() && !up {
        Some(format!(
            "--config goes with `up`: `brokerbench broker up {name} --config KEY=VALUE`"
        ))
    } else if options.driver_file && !status {
        Some(format!(
            "--driver-file goes with `status`: `brokerbench broker status {name} --driver-file`"
        ))
    } else if options.json && !status {
        Some(format!(
            "--json goes with `status`: `brokerbench broker status {name} --json`"
        ))
    } else {
        None
    };
    match misplaced {
        Some(message) => Err(crate::BadInput(message).into()),
        None => Ok(()),
    }
}

/// `status --json`: `{"family", "running", "version", "address", "nodes": [...]}`; exit 1 when
/// it does not run, as the human form.
fn status_json(name: &str, status: Option<BrokerStatus>) -> anyhow::Result<ExitCode> {
    let value = match &status {
        None => serde_json::json!({"family": name, "running": false, "nodes": []}),
        Some(status) => serde_json::json!({
            "family": name,
            "running": true,
            "version": status.version,
            "address": status.address,
            "data_dir": status.data_dir,
            "log_file": status.log_file,
            "note": status.note,
            "settings": status.settings.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "nodes": status.nodes.iter().map(|node| serde_json::json!({
                "id": node.id,
                "pid": node.pid,
                "address": node.address,
                "up": node.up,
            })).collect::<Vec<_>>(),
        }),
    };
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(ExitCode::from(if status.is_some() { 0 } else { 1 }))
}

/// What `down` did; `running` is how many nodes ran before it.
fn down(name: &str, stopped: Option<u32>, running: usize) -> anyhow::Result<ExitCode> {
    match (stopped, running) {
        (Some(pid), 0 | 1) => println!("{name} stopped (pid {pid})"),
        (Some(pid), nodes) => println!("{name} stopped: {nodes} nodes (pid {pid} and the others)"),
        (None, _) => println!("{name} was not running"),
    }
    Ok(ExitCode::SUCCESS)
}

fn status(name: &str, status: Option<BrokerStatus>) -> anyhow::Result<ExitCode> {
    match status {
        Some(status) => {
            print_status(&status, "running");
            Ok(ExitCode::SUCCESS)
        }
        None => {
            println!("{name}: not running (start it with `brokerbench broker up {name}`)");
            Ok(ExitCode::from(1))
        }
    }
}

/// What `up` did: the status it returned, and whether the broker was running already.
fn print_up((status, already): (BrokerStatus, bool)) {
    print_status(
        &status,
        if already {
            "already running"
        } else {
            "started"
        },
    );
}

fn print_status(status: &BrokerStatus, state: &str) {
    if let Some(note) = &status.note {
        println!("note: {note}");
    }
    println!(
        "{} {} {state} at {} (pid {})\n  data: {}\n  log:  {}",
        status.name,
        status.version,
        status.address,
        status.pid,
        status.data_dir.display(),
        status.log_file.display()
    );
    if !status.settings.is_empty() {
        println!("  settings: {}", settings::describe(&status.settings));
    }
    if status.nodes.len() > 1 {
        println!("  nodes: {}", status.nodes.len());
        for node in &status.nodes {
            let pid = match (node.pid, node.up) {
                (Some(pid), _) => format!("pid {pid}"),
                // A node that runs inside another's process (a Pulsar standalone's bookie).
                (None, true) => "up, in node 1's process".to_string(),
                (None, false) => "down".to_string(),
            };
            println!("    node {} at {} ({pid})", node.id, node.address);
        }
    }
}

/// Starts the family's managed broker if needed and returns its status, the address its
/// driver connects to, and its nodes' metrics endpoints (with their ids), saying what it did
/// on stderr.
pub fn managed(family: &dyn Family) -> anyhow::Result<(BrokerStatus, String, Vec<NodeUrl>)> {
    let managed = family.managed(&brokerbench_brokers::home());
    if managed.status()?.is_none() {
        eprintln!(
            "no {} configured: starting the managed local {}...",
            family.address_field(),
            family.title()
        );
    }
    let (status, already) = managed.up()?;
    if let Some(note) = &status.note {
        eprintln!("note: {note}");
    }
    say_using(family.title(), &status, already);
    let address = managed.client_address(&status);
    Ok((status, address, managed.metrics_urls()))
}

/// Says on stderr which managed broker a run uses (`product` is its name in prose), and how to
/// stop it.
fn say_using(product: &str, status: &BrokerStatus, already: bool) {
    eprintln!(
        "using the managed {product} {} at {} (pid {}{}; `brokerbench broker down {}` stops it)",
        status.version,
        status.address,
        status.pid,
        if already {
            ", already running"
        } else {
            ", left running for the next run"
        },
        status.name
    );
}
