//! One module per subcommand.

mod broker;
mod compare;
mod completions;
mod data;
mod find_study;
mod k8s;
mod man;
mod merge;
mod merge_folder;
mod merge_read;
mod merge_summary;
mod merge_table;
mod report;
mod run;
mod run_broker;
mod run_faults;
mod run_inputs;
mod run_results;
mod run_shard;
mod run_watchers;
mod study;

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Cli, Command, DataCommand, K8sCommand};

/// Reads and parses a JSON file of a results or study folder, naming the file on error.
pub(crate) fn read_json(path: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Study(args) => study::study(args),
        Command::Compare(args) => compare::compare(&args.inputs, &args.labels, args.json),
        Command::Report {
            folders,
            out,
            labels,
        } => report::report(&folders, out.as_deref(), &labels),
        Command::Validate { files } => validate(&files),
        Command::Merge {
            folders,
            out,
            exit_zero_on_errors,
        } => merge::merge(&folders, out.as_deref(), exit_zero_on_errors),
        Command::K8s {
            command:
                K8sCommand::Render {
                    shards,
                    workload,
                    driver,
                    overrides,
                    out,
                    image,
                    name,
                    namespace,
                    storage_class,
                    results_size,
                    cpu,
                },
        } => k8s::render(k8s::RenderArgs {
            shards,
            workload: &workload,
            driver: &driver,
            overrides: &overrides,
            out: out.as_deref(),
            image: &image,
            name: name.as_deref(),
            namespace: namespace.as_deref(),
            storage_class: storage_class.as_deref(),
            results_size: &results_size,
            cpu: &cpu,
        }),
        Command::Broker {
            action,
            broker,
            tls,
            no_tls,
            driver_file,
            nodes,
            config,
            json,
        } => broker::broker(
            action,
            &broker,
            broker::BrokerOptions {
                tls: (tls || no_tls).then_some(tls),
                driver_file,
                nodes,
                config,
                json,
            },
        ),
        Command::Data {
            command: DataCommand::Generate { records, out, seed },
        } => data::generate(records, &out, seed),
        Command::Completions { shell } => completions::completions(shell),
        Command::Man { out } => man::man(out.as_deref()),
    }
}

fn validate(files: &[std::path::PathBuf]) -> anyhow::Result<ExitCode> {
    for file in files {
        let (kind, notes) = brokerbench_model::spec::validate_file_noting(
            &crate::families::REGISTRY.schemas(),
            file,
        )
        .with_context(|| format!("validating '{}'", file.display()))?;
        for note in notes {
            eprintln!("note: {note}");
        }
        println!("{}: valid {kind} file", file.display());
    }
    Ok(ExitCode::SUCCESS)
}
