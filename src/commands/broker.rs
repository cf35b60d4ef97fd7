//! `brokerbench broker install|up|down|status KIND`.

use std::process::ExitCode;

use brokerbench_brokers::kafka::Kafka;
use brokerbench_brokers::BrokerStatus;

use crate::cli::{BrokerAction, BrokerKind};

pub fn broker(action: BrokerAction, kind: BrokerKind) -> anyhow::Result<ExitCode> {
    let BrokerKind::Kafka = kind;
    let kafka = Kafka::new(&brokerbench_brokers::home());
    match action {
        BrokerAction::Install => {
            kafka.install()?;
            println!(
                "kafka {} installed in {}",
                brokerbench_brokers::kafka::VERSION,
                kafka.lib_dir().display()
            );
        }
        BrokerAction::Up => {
            let (status, already) = kafka.up()?;
            print_status(
                &status,
                if already {
                    "already running"
                } else {
                    "started"
                },
            );
        }
        BrokerAction::Down => match kafka.down()? {
            Some(pid) => println!("kafka stopped (pid {pid})"),
            None => println!("kafka was not running"),
        },
        BrokerAction::Status => match kafka.status()? {
            Some(status) => print_status(&status, "running"),
            None => {
                println!("kafka: not running (start it with `brokerbench broker up kafka`)");
                return Ok(ExitCode::from(1));
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}

fn print_status(status: &BrokerStatus, state: &str) {
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

/// Starts the managed Kafka if needed and returns its status, saying what it did on stderr.
pub fn managed_kafka() -> anyhow::Result<BrokerStatus> {
    let kafka = Kafka::new(&brokerbench_brokers::home());
    if kafka.status()?.is_none() {
        eprintln!("no bootstrap_servers configured: starting the managed local Kafka...");
    }
    let (status, already) = kafka.up()?;
    eprintln!(
        "using the managed Kafka {} at {} (pid {}{}; `brokerbench broker down kafka` stops it)",
        status.version,
        status.address,
        status.pid,
        if already {
            ", already running"
        } else {
            ", left running for the next run"
        }
    );
    Ok(status)
}
