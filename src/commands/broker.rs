//! `brokerbench broker install|up|down|status KIND`.

use std::process::ExitCode;

use brokerbench_brokers::kafka::Kafka;
use brokerbench_brokers::rabbitmq::RabbitMq;
use brokerbench_brokers::BrokerStatus;

use crate::cli::{BrokerAction, BrokerKind};

pub fn broker(action: BrokerAction, kind: BrokerKind) -> anyhow::Result<ExitCode> {
    let home = brokerbench_brokers::home();
    match kind {
        BrokerKind::Kafka => {
            let kafka = Kafka::new(&home);
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
                    print_up(kafka.up()?);
                    if let Some(url) = kafka.metrics_url() {
                        println!("  metrics: {url}");
                    }
                }
                BrokerAction::Down => return down("kafka", kafka.down()?),
                BrokerAction::Status => return status("kafka", kafka.status()?),
            }
        }
        BrokerKind::Rabbitmq => {
            let rabbit = RabbitMq::new(&home);
            match action {
                BrokerAction::Install => {
                    if rabbit.is_installed() {
                        println!(
                            "rabbitmq {} is installed (Debian package rabbitmq-server)",
                            rabbit.version()
                        );
                    } else {
                        anyhow::bail!(
                            "RabbitMQ comes from Debian's package: run `sudo apt-get install rabbitmq-server` (scripts/setup does)"
                        );
                    }
                }
                BrokerAction::Up => {
                    print_up(rabbit.up()?);
                    println!(
                        "  management: http://127.0.0.1:{}/  metrics: http://127.0.0.1:{}/metrics",
                        rabbit.management_port(),
                        rabbit.prometheus_port()
                    );
                }
                BrokerAction::Down => return down("rabbitmq", rabbit.down()?),
                BrokerAction::Status => return status("rabbitmq", rabbit.status()?),
            }
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

/// Starts the managed Kafka if needed and returns its status and metrics endpoint, saying
/// what it did on stderr.
pub fn managed_kafka() -> anyhow::Result<(BrokerStatus, Option<String>)> {
    let kafka = Kafka::new(&brokerbench_brokers::home());
    if kafka.status()?.is_none() {
        eprintln!("no bootstrap_servers configured: starting the managed local Kafka...");
    }
    let (status, already) = kafka.up()?;
    say_using("Kafka", &status, already);
    Ok((status, kafka.metrics_url()))
}

/// Starts the managed RabbitMQ if needed and returns its status, AMQP URI and metrics
/// endpoint, saying what it did on stderr.
pub fn managed_rabbitmq() -> anyhow::Result<(BrokerStatus, String, String)> {
    let rabbit = RabbitMq::new(&brokerbench_brokers::home());
    if rabbit.status()?.is_none() {
        eprintln!("no uri configured: starting the managed local RabbitMQ...");
    }
    let (status, already) = rabbit.up()?;
    if let Some(note) = &status.note {
        eprintln!("note: {note}");
    }
    say_using("RabbitMQ", &status, already);
    let metrics = format!("http://127.0.0.1:{}/metrics", rabbit.prometheus_port());
    Ok((status, rabbit.amqp_uri(), metrics))
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
