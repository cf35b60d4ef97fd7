//! What a run is given: the workload and driver files (the driver perhaps on standard input)
//! with `--set` and `--fault` applied, checked before anything starts, and the run id when
//! `--run-id` gives none.

use anyhow::Context;
use brokerbench_model::{load_specs_from, Payload, SpecInput};

use crate::cli::RunArgs;
use crate::families::REGISTRY;
use crate::BadInput;

/// The workload and driver files (or the driver from standard input), with `--set` applied
/// and everything validated.
pub(super) fn load(args: &RunArgs) -> anyhow::Result<brokerbench_model::Specs> {
    let from_stdin = match &args.driver {
        Some(path) if path.as_os_str() == STDIN_DRIVER => Some(driver_from_stdin()?),
        _ => None,
    };
    let driver = match (&from_stdin, &args.driver) {
        (Some(value), _) => SpecInput::Inline {
            name: STDIN_DRIVER_NAME,
            value,
        },
        (None, path) => path.as_deref().into(),
    };
    let mut overrides = args.overrides.clone();
    overrides.extend(faults_override(&args.faults)?);
    Ok(load_specs_from(
        &REGISTRY.schemas(),
        args.workload.as_deref().into(),
        driver,
        &overrides,
    )?)
}

/// `--fault` flags as one `faults=[…]` override: they replace the workload file's faults.
fn faults_override(flags: &[String]) -> anyhow::Result<Option<String>> {
    if flags.is_empty() {
        return Ok(None);
    }
    let faults = flags
        .iter()
        .map(|flag| brokerbench_model::faults::fault_from_flag(flag))
        .collect::<Result<Vec<_>, _>>()
        .map_err(BadInput)?;
    Ok(Some(format!("faults={}", serde_json::Value::Array(faults))))
}

/// What the files name outside themselves: the folder of `--omb-result` and the payload
/// file; prints the notes reading the files left.
pub(super) fn check_inputs(args: &RunArgs, specs: &brokerbench_model::Specs) -> anyhow::Result<()> {
    if let Some(path) = &args.omb_result {
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !parent.is_dir() {
            return Err(BadInput(format!(
                "--omb-result {}: the folder '{}' does not exist; create it or choose another file",
                path.display(),
                parent.display()
            ))
            .into());
        }
    }
    if !args.quiet && !args.json {
        for note in &specs.notes {
            eprintln!("note: {note}");
        }
    }
    check_payload(&specs.workload, &specs.workload_source)
}

/// A payload file must be readable, and a binary one exactly one message long.
fn check_payload(workload: &brokerbench_model::Workload, source: &str) -> anyhow::Result<()> {
    if let Payload::Binary { path } = &workload.payload {
        let length = std::fs::metadata(path)
            .map_err(|e| {
                BadInput(format!(
                    "{source}: field `payload.path`: cannot read '{}': {e}",
                    path.display()
                ))
            })?
            .len();
        if length != workload.message_size {
            return Err(BadInput(format!(
                "{source}: field `payload.path`: '{}' is {length} bytes, and every message is that file: set message_size: {length}B (it is {}B)",
                path.display(),
                workload.message_size
            ))
            .into());
        }
    }
    if let Payload::File { path, .. } = &workload.payload {
        std::fs::metadata(path).map_err(|e| {
            BadInput(format!(
                "{source}: field `payload.path`: cannot read '{}': {e}; give the path of a file with one record per line (brokerbench data generate writes one)",
                path.display()
            ))
        })?;
    }
    Ok(())
}

/// `--driver -`: the driver file is read from standard input.
pub const STDIN_DRIVER: &str = "-";
/// How a driver read from standard input is named in messages and in the manifest.
const STDIN_DRIVER_NAME: &str = "driver file on standard input";

/// Reads the driver file's text from standard input. A study hands a driver that holds
/// credentials to its runs this way, so that they are never written to a file.
fn driver_from_stdin() -> anyhow::Result<brokerbench_model::yaml::Value> {
    use std::io::Read as _;
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("--driver -: reading the driver file from standard input")?;
    brokerbench_model::yaml::from_str(&text).map_err(|e| {
        BadInput(format!(
            "--driver -: the {STDIN_DRIVER_NAME} is not valid YAML: {e}"
        ))
        .into()
    })
}

/// A short id that differs between runs (time and process id mixed).
pub(super) fn run_id(now_ns: u64) -> String {
    let mut x = now_ns ^ ((std::process::id() as u64) << 32);
    // splitmix64 finalizer: spreads nearby inputs over the whole range.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^= x >> 31;
    format!("{:08x}", x as u32)
}
