//! `brokerbench broker install|up|down|status KIND`.

use std::process::ExitCode;

use brokerbench_brokers::BrokerStatus;
use brokerbench_driver::Family;

use crate::cli::BrokerAction;
use crate::families::REGISTRY;

/// What `broker` was asked besides the action: `--tls`/`--no-tls` (`up`), `--driver-file`
/// (`status`).
#[derive(Debug, Default, Clone, Copy)]
pub struct BrokerOptions {
    pub tls: Option<bool>,
    pub driver_file: bool,
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
    let managed = family.managed(&brokerbench_brokers::home());
    if options.tls.is_some() && !matches!(action, BrokerAction::Up) {
        return Err(crate::BadInput(format!(
            "--tls and --no-tls go with `up`: `brokerbench broker up {name} --tls`"
        ))
        .into());
    }
    if options.driver_file && !matches!(action, BrokerAction::Status) {
        return Err(crate::BadInput(format!(
            "--driver-file goes with `status`: `brokerbench broker status {name} --driver-file`"
        ))
        .into());
    }
    match action {
        BrokerAction::Install => println!("{}", managed.install()?),
        BrokerAction::Up => {
            if let Some(on) = options.tls {
                managed.set_tls(on)?;
            }
            print_up(managed.up()?);
            for line in managed.endpoints() {
                println!("  {line}");
            }
        }
        BrokerAction::Down => return down(name, managed.down()?),
        BrokerAction::Status if options.driver_file => match managed.status()? {
            Some(status) => print!("{}", managed.driver_file(&status)?),
            None => {
                eprintln!("{name}: not running (start it with `brokerbench broker up {name}`)");
                return Ok(ExitCode::from(1));
            }
        },
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

fn down(name: &str, stopped: Option<u32>) -> anyhow::Result<ExitCode> {
    match stopped {
        Some(pid) => println!("{name} stopped (pid {pid})"),
        None => println!("{name} was not running"),
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
}

/// Starts the family's managed broker if needed and returns its status, the address its
/// driver connects to, and its metrics endpoint, saying what it did on stderr.
pub fn managed(family: &dyn Family) -> anyhow::Result<(BrokerStatus, String, Option<String>)> {
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
    Ok((status, address, managed.metrics_url()))
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
