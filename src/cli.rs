//! Command-line interface: subcommands and flags. Doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod examples;

/// Measure how fast a message broker ingests and delivers messages, at what latency, losing what.
#[derive(Debug, Parser)]
#[command(
    name = "brokerbench",
    version,
    about,
    propagate_version = true,
    after_long_help = examples::TOP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark (default: the built-in quickstart against the managed local Kafka).
    #[command(after_long_help = examples::RUN)]
    Run(RunArgs),
    /// Run a study: a grid of settings × repetitions (or a search for the maximum sustainable
    /// rate), resumable, with tables of every run and of every cell.
    #[command(after_long_help = examples::STUDY)]
    Study(StudyArgs),
    /// Compare run folders or study cells side by side, with ratios and whether each
    /// difference is beyond the noise of the repetitions.
    #[command(after_long_help = examples::COMPARE)]
    Compare(CompareArgs),
    /// Build report.html: for a run folder or a study folder (written into it), or for
    /// several run folders (a comparison).
    #[command(after_long_help = examples::REPORT)]
    Report {
        /// A run folder, a study folder, or several run folders to compare.
        #[arg(required = true)]
        folders: Vec<PathBuf>,
        /// Where to write the report. Default: FOLDER/report.html for one folder,
        /// comparison.html for several.
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        /// A comparison's name for each run, given once per folder in the folders' order
        /// (`--label acks-1 --label acks-all`). Default: the folder names when they differ
        /// and were not made by brokerbench, else what differs between the runs' manifests
        /// (family, workload, settings).
        #[arg(long = "label", value_name = "NAME")]
        labels: Vec<String>,
    },
    /// Merge the results folders of a run's shards (`run --shard I/N`) into one: latency
    /// histograms added, counts summed, delivery ledgers joined, a table of the shards.
    #[command(after_long_help = examples::MERGE)]
    Merge {
        /// Every shard's results folder, or a folder holding them (the newest run's shards
        /// in it and two levels below).
        #[arg(required = true)]
        folders: Vec<PathBuf>,
        /// The merged folder. Default: WORKLOAD-RUNID-merged beside the first folder.
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        /// Exit 0 when the merged run has errors or lost messages (they are in its results).
        #[arg(long)]
        exit_zero_on_errors: bool,
    },
    /// Kubernetes: manifests that run a workload as shards of an Indexed Job.
    #[command(after_long_help = examples::K8S)]
    K8s {
        #[command(subcommand)]
        command: K8sCommand,
    },
    /// Check workload and driver files without running anything.
    #[command(after_long_help = examples::VALIDATE)]
    Validate {
        /// Workload or driver files (a file with a `driver:` field is a driver file).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Manage a local broker that brokerbench installs and runs for you.
    #[command(after_long_help = examples::BROKER)]
    Broker {
        #[arg(value_enum)]
        action: BrokerAction,
        /// Which broker: one of the registered driver families.
        #[arg(value_parser = broker_names())]
        broker: String,
        /// With `up`: also listen for TLS, with a SASL user (a throwaway CA and certificates
        /// are generated into the broker's folder); kept for later starts until --no-tls.
        #[arg(long, conflicts_with = "no_tls")]
        tls: bool,
        /// With `up`: start without the TLS listeners again.
        #[arg(long)]
        no_tls: bool,
        /// With `status`: print a driver file for the running broker (its TLS listener, with
        /// the SASL user's password, when TLS is on) instead of the status.
        #[arg(long, conflicts_with = "json")]
        driver_file: bool,
        /// With `up`: how many nodes (1 to 5). Node 1 keeps the family's usual port; the
        /// others take free ones. A running broker of another size is left alone.
        #[arg(long, value_name = "N")]
        nodes: Option<u32>,
        /// With `up`: a server setting for every node, KEY=VALUE (repeatable): Kafka's
        /// server.properties, RabbitMQ's rabbitmq.conf, NATS's configuration keys. A running
        /// broker with other settings is left alone.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// With `status`: the same facts as JSON, for scripts (family, version, every node's
        /// id, pid, address and whether it is up).
        #[arg(long)]
        json: bool,
    },
    /// Data sets for replay.
    #[command(after_long_help = examples::DATA)]
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Print a completion script for a shell (`source <(brokerbench completions bash)`);
    /// `scripts/setup` installs the bash one.
    #[command(after_long_help = examples::COMPLETIONS)]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a folder;
    /// `scripts/setup` installs them.
    #[command(after_long_help = examples::MAN)]
    Man {
        /// Write brokerbench.1 and a brokerbench-COMMAND.1 for each command into this folder
        /// instead of printing brokerbench.1.
        #[arg(long, value_name = "FOLDER")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Workload file (YAML): brokerbench's, or an OpenMessaging Benchmark workload file
    /// unchanged. Default: the built-in quickstart.
    pub workload: Option<PathBuf>,
    /// Driver file (YAML); `-` reads it from standard input (how a study hands its runs an
    /// inline driver that holds credentials). Default: Kafka on the managed local broker.
    #[arg(long, short = 'd')]
    pub driver: Option<PathBuf>,
    /// Override a field of either file, e.g. `--set rate=20000 --set producer_config.acks=all`.
    #[arg(long = "set", short = 's', value_name = "FIELD=VALUE")]
    pub overrides: Vec<String>,
    /// A fault during the measurement window, as KEY=VALUE pairs separated by commas
    /// (repeatable; replaces the workload file's `faults:`), e.g.
    /// `--fault at=10s,action=kill,node=2,restart_after=10s`. Keys: at, action (kill, stop,
    /// pause, command), node (an id or random), for, restart_after, run, undo.
    #[arg(long = "fault", value_name = "KEY=VALUE,...")]
    pub faults: Vec<String>,
    /// Results folder for this run. Default: results/<date>-<time>-<workload name>.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the OpenMessaging Benchmark result JSON (omb-result.json, always in the
    /// results folder) to FILE, e.g. for OMB's bin/create_charts.py.
    #[arg(long, value_name = "FILE")]
    pub omb_result: Option<PathBuf>,
    /// No live progress line.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Count heap allocations and report allocations per message (brokerbench's own code;
    /// the C client library's allocations are not seen).
    #[arg(long)]
    pub count_allocations: bool,
    /// How often to sample broker, client and host resources and broker metrics.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub sample_interval: std::time::Duration,
    /// Do not sample resources or scrape broker metrics.
    #[arg(long)]
    pub no_monitor: bool,
    /// The broker's process id, for an external broker (its child processes count too).
    #[arg(long, value_name = "PID", conflicts_with = "broker_process")]
    pub broker_pid: Option<u32>,
    /// Find an external broker's process by name (e.g. `kafka.Kafka`, `beam.smp`).
    #[arg(long, value_name = "NAME")]
    pub broker_process: Option<String>,
    /// The broker's metrics endpoint, e.g. http://127.0.0.1:9404/metrics or
    /// https://user:password@broker:9404/metrics (default: the driver file's
    /// `broker_metrics.url`, else the managed broker's own endpoint). CA, bearer token and
    /// timeout: the driver file's `broker_metrics:` block, or BROKERBENCH_METRICS_* variables.
    #[arg(long, value_name = "URL")]
    pub broker_metrics: Option<String>,
    /// Serve live figures in the Prometheus format at this address (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDRESS")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Run shard I of N of the workload: producers and consumers numbered n with n mod N = I
    /// (the rate follows the producers). Every shard needs the same files, --run-id and
    /// --coordinator; `brokerbench merge` joins their folders into one run.
    #[arg(long, value_name = "I/N", value_parser = brokerbench_engine::shard::Shard::parse, conflicts_with = "shards")]
    pub shard: Option<brokerbench_engine::shard::Shard>,
    /// Run one of N shards, its index from JOB_COMPLETION_INDEX (as in a Kubernetes Indexed
    /// Job) or BROKERBENCH_SHARD_INDEX.
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// The run id the shards share (topic, queue and group names carry it); letters, digits,
    /// `-` and `_`, at most 40. Default for a single run: a random one.
    #[arg(long, value_name = "ID", env = "BROKERBENCH_RUN_ID")]
    pub run_id: Option<String>,
    /// HOST:PORT at which the shards reach shard 0, which coordinates their start (shard 0
    /// listens on it: on that address when HOST is an IP address, else on every interface).
    #[arg(long, value_name = "HOST:PORT", env = "BROKERBENCH_COORDINATOR")]
    pub coordinator: Option<String>,
    /// How long shards wait for each other before the start, and shard 0 for the others to
    /// finish.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub shard_timeout: std::time::Duration,
    /// Exit 0 when the run completed with errors or lost messages (they are in its results),
    /// for job runners that count any other exit as a failure (a Kubernetes Job).
    #[arg(long)]
    pub exit_zero_on_errors: bool,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

/// The live dashboard of a run or study.
#[derive(Debug, Args, Clone, Default)]
pub struct DashboardArgs {
    /// Serve a live dashboard: the report's charts, updated every second as the results
    /// arrive (default address 127.0.0.1 with a free port; give one as
    /// `--dashboard=127.0.0.1:8080`). Its address is printed at the start.
    #[arg(long, value_name = "ADDRESS", num_args = 0..=1, require_equals = true,
          default_missing_value = "127.0.0.1:0")]
    pub dashboard: Option<std::net::SocketAddr>,
    /// Let --dashboard listen on an address that is not loopback: everyone who can reach it
    /// sees the page (which holds no credentials).
    #[arg(long, requires = "dashboard")]
    pub dashboard_public: bool,
    /// Open the dashboard in the desktop's browser (xdg-open) once it listens.
    #[arg(long, requires = "dashboard")]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct StudyArgs {
    /// Study file (YAML): workload, driver, set, axes, repetitions, order, between_runs,
    /// on_failure, find.
    pub file: PathBuf,
    /// Override a field for every run, e.g. `--set duration=60s`.
    #[arg(long = "set", short = 's', value_name = "FIELD=VALUE")]
    pub overrides: Vec<String>,
    /// List the runs (after validating every one of them) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Smoke test: every run a few seconds long (1 s warm-up, 2 s measurement), one
    /// repetition, no cooldown between runs.
    #[arg(long)]
    pub quick: bool,
    /// Only enough cells that every value of every axis runs at least once: cell i takes each
    /// axis's value i (wrapping around a shorter axis), as many cells as the longest axis has
    /// values. Every cell of the grid is still checked before the first run starts.
    #[arg(long)]
    pub cover: bool,
    /// Study folder. Default: the newest studies/<date>-<time>-<name> of this study (resumed),
    /// or a new one.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Start a new study folder instead of resuming the newest one.
    #[arg(long)]
    pub fresh: bool,
    /// Do not sample resources or scrape broker metrics in the runs.
    #[arg(long)]
    pub no_monitor: bool,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run folders, study folders (a study with one cell), or study cells as `STUDY_DIR#N`
    /// (N = the `cell` column of cells.csv). The first is the baseline of the ratios.
    #[arg(required = true, num_args = 2..)]
    pub inputs: Vec<String>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// A name for each input, given once per input in the inputs' order
    /// (`--label acks-1 --label acks-all`). Default: the folder names when they differ and
    /// were not made by brokerbench, else what differs between the runs' manifests (family,
    /// workload, settings).
    #[arg(long = "label", value_name = "NAME")]
    pub labels: Vec<String>,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let d = brokerbench_model::units::parse_duration(text)?;
    if d.is_zero() {
        return Err("must be longer than 0s, e.g. 1s or 500ms".into());
    }
    Ok(d)
}

/// What `brokerbench broker` does with a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerAction {
    Install,
    Up,
    Down,
    Status,
}

impl ValueEnum for BrokerAction {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            BrokerAction::Install,
            BrokerAction::Up,
            BrokerAction::Down,
            BrokerAction::Status,
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            BrokerAction::Install => PossibleValue::new("install").help(install_help()),
            BrokerAction::Up => PossibleValue::new("up").help(
                "Start the broker (idempotent) and wait until it answers; a broker not installed yet is installed first, as `install` does, saying so",
            ),
            BrokerAction::Down => PossibleValue::new("down").help("Stop the broker brokerbench started"),
            BrokerAction::Status => PossibleValue::new("status").help("Show address, pid and version"),
        })
    }
}

/// `install`'s help: where each registered family's broker comes from.
fn install_help() -> String {
    let sources: Vec<String> = crate::families::REGISTRY
        .0
        .iter()
        .filter_map(|family| Some(format!("{}: {}", family.name(), family.installed_from()?)))
        .collect();
    format!(
        "Install the broker ahead of its first use. {}. apt-get runs as root, or through sudo without a password prompt",
        sources.join("; ")
    )
}

/// The registered families as `broker` choices, each with its one-line description.
fn broker_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        crate::families::REGISTRY
            .0
            .iter()
            .map(|family| clap::builder::PossibleValue::new(family.name()).help(family.about())),
    )
}

#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// Write the manifests: the files (a ConfigMap, the driver file as a Secret), a results
    /// volume, a headless Service and an Indexed Job of N shards, and a merge Job to apply
    /// once the shards are done. Prints the kubectl commands.
    #[command(after_long_help = examples::K8S)]
    Render {
        /// Number of shards (pods), each running its share of producers and consumers.
        #[arg(long)]
        shards: u32,
        /// The workload file.
        workload: PathBuf,
        /// The driver file; it must name the broker as the pods reach it.
        driver: PathBuf,
        /// Change a workload or driver field on every shard (as for `run`).
        #[arg(long = "set", short = 's', value_name = "FIELD=VALUE")]
        overrides: Vec<String>,
        /// Where to write the manifests. Default: deploy/kubernetes/NAME.
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
        /// The container image with brokerbench (deploy/kubernetes/Dockerfile builds one).
        #[arg(long, default_value = concat!("brokerbench:", env!("CARGO_PKG_VERSION")))]
        image: String,
        /// Name of the Job and its objects. Default: brokerbench-WORKLOAD.
        #[arg(long)]
        name: Option<String>,
        /// Namespace of the objects (default: kubectl's).
        #[arg(long)]
        namespace: Option<String>,
        /// Storage class of the results volume, which every shard writes (ReadWriteMany).
        #[arg(long)]
        storage_class: Option<String>,
        /// Size of the results volume.
        #[arg(long, default_value = "1Gi")]
        results_size: String,
        /// CPU each shard requests.
        #[arg(long, default_value = "1")]
        cpu: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Write generated sensor records (DEBS 2012 Grand Challenge shape), one per line.
    #[command(after_long_help = examples::DATA)]
    Generate {
        /// Number of records.
        #[arg(long)]
        records: u64,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
        /// Seed for reproducible data.
        #[arg(long, default_value_t = 2012)]
        seed: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
