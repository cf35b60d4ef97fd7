//! `brokerbench run`: validate, reach the broker, create the results folder, then start the
//! clock; write results as the run goes; print the summary; exit by what happened.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use brokerbench_driver::Driver;
use brokerbench_engine::{Clock, RunControl};
use brokerbench_kafka::KafkaDriver;
use brokerbench_model::redact::redact_assignment;
use brokerbench_model::{load_specs, DriverConfig, Payload, RunStatus};
use brokerbench_report::{
    folder_name, terminal_summary, BrokerInfo, LiveLine, Manifest, ResultsFolder, Tee,
};

use crate::allocations::AllocationWindow;
use crate::cli::RunArgs;
use crate::{exit, BadInput};

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let specs = load_specs(
        args.workload.as_deref(),
        args.driver.as_deref(),
        &args.overrides,
    )?;
    let workload = specs.workload.clone();
    if let Payload::File { path, .. } = &workload.payload {
        std::fs::metadata(path).map_err(|e| {
            BadInput(format!(
                "{}: field `payload.path`: cannot read '{}': {e}; give the path of a file with one record per line (brokerbench data generate writes one)",
                specs.workload_source,
                path.display()
            ))
        })?;
    }

    let (mut driver, broker): (Box<dyn Driver>, BrokerInfo) = match &specs.driver {
        DriverConfig::Kafka(config) => {
            let (bootstrap, broker) = match &config.bootstrap_servers {
                Some(servers) => (
                    servers.clone(),
                    BrokerInfo {
                        address: servers.clone(),
                        version: None,
                        managed: false,
                    },
                ),
                None => {
                    let status = super::broker::managed_kafka()?;
                    (
                        status.address.clone(),
                        BrokerInfo {
                            address: status.address,
                            version: Some(status.version),
                            managed: true,
                        },
                    )
                }
            };
            (
                Box::new(KafkaDriver::new(config.clone(), bootstrap)),
                broker,
            )
        }
    };
    driver.connect()?;

    let clock = Clock::process();
    let started_ns = clock.now_ns();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(folder_name(started_ns, &workload.name)));
    let run_id = run_id(started_ns);
    let mut manifest = Manifest::new(env!("CARGO_PKG_VERSION"), run_id.clone(), started_ns);
    manifest.command = std::env::args().map(|a| redact_assignment(&a)).collect();
    manifest.workload = serde_json::to_value(&workload)?;
    manifest.driver = specs.driver.redacted();
    manifest.workload_source = specs.workload_source.clone();
    manifest.driver_source = specs.driver_source.clone();
    manifest.broker = Some(broker);
    let mut folder = ResultsFolder::create(&out, manifest)
        .with_context(|| format!("creating the results folder '{}'", out.display()))?;

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second Ctrl-C while draining ends the process at once.
        signal_hook::flag::register_conditional_shutdown(
            signal,
            exit::INTERRUPTED as i32,
            stop.clone(),
        )?;
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let control = RunControl { run_id, stop };
    if !args.quiet && !args.json {
        eprintln!(
            "running '{}' on {}: warm-up {:?}, measurement {:?}; results in {}",
            workload.name,
            driver.name(),
            workload.warmup,
            workload.duration,
            out.display()
        );
    }
    let mut live = LiveLine::new(!args.quiet);
    let mut allocation_window = AllocationWindow::default();
    if args.count_allocations {
        crate::allocations::enable();
    }
    let result = {
        let mut tee = Tee::new(vec![&mut folder, &mut live, &mut allocation_window]);
        brokerbench_engine::run(&workload, driver.as_mut(), &mut tee, &control)
    };
    live.finish();
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            let message = format!("{error:#}");
            let _ = folder.mark_failed(&message, clock.now_ns());
            return Err(error.into());
        }
    };
    let mut outcome = outcome;
    if args.count_allocations {
        outcome.summary.client.allocations_per_message =
            allocation_window.per_message(outcome.summary.window.acknowledged.max(outcome.summary.window.sent));
    }
    let summary = &outcome.summary;
    folder
        .finish(summary, outcome.ended_ns)
        .with_context(|| format!("writing results to '{}'", out.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(summary)?);
    } else {
        print!("{}", terminal_summary(summary));
        println!("results: {}", out.display());
    }
    Ok(ExitCode::from(match summary.status {
        RunStatus::Interrupted => exit::INTERRUPTED,
        _ if summary.is_clean() => exit::CLEAN,
        _ => exit::WITH_ERRORS,
    }))
}

/// A short id that differs between runs (time and process id mixed).
fn run_id(now_ns: u64) -> String {
    let mut x = now_ns ^ ((std::process::id() as u64) << 32);
    // splitmix64 finalizer: spreads nearby inputs over the whole range.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^= x >> 31;
    format!("{:08x}", x as u32)
}
