//! Expanding a study into runs: the grid's cells (first axis outermost) × repetitions, in the
//! study's order, each with the `--set` overrides that make it, and a key that identifies a
//! run by its resolved configuration (so a resumed study finds what it already did).

use std::fmt;
use std::path::Path;

use brokerbench_model::yaml::Value;
use brokerbench_model::{load_specs_from, DriverSchema, SpecError, SpecInput, Specs};

use crate::broker::{is_broker_path, BrokerChoice};
use crate::file::{Order, Study, StudyError, StudyInput};
use crate::text::flow_text;

/// Overrides `--quick` adds to every run: a few seconds each.
pub const QUICK_SETS: &[&str] = &["warmup=1s", "duration=2s", "drain_timeout=5s"];

/// One run of a study, before it runs.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// Cell of the grid, 0-based, in grid order (first axis outermost).
    pub cell: usize,
    /// Repetition, 1-based.
    pub repetition: u32,
    /// This cell's value of every axis path, in axis order.
    pub values: Vec<(String, Value)>,
    /// Workload file (after a `workload` axis).
    pub workload: StudyInput,
    /// Driver file (after a `driver` axis).
    pub driver: StudyInput,
    /// The `--set` overrides of this run, in the order applied.
    pub overrides: Vec<String>,
    /// The managed broker this run uses, when the study chose one (`broker:`, `broker.*`).
    pub broker: BrokerChoice,
}

impl PlannedRun {
    /// The cell's axis values as `path=value` text, e.g. `producer_config.acks=all`, with
    /// credentials redacted (it is printed and written).
    pub fn cell_label(&self) -> String {
        if self.values.is_empty() {
            return "(single cell)".into();
        }
        self.values
            .iter()
            .map(|(p, v)| {
                let v = match (p.as_str(), v) {
                    ("driver" | "workload", Value::String(f)) => Path::new(f)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| f.clone()),
                    _ => flow_text(v),
                };
                brokerbench_model::redact::redact_assignment(&format!("{p}={v}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Loads and validates this run's workload and driver with its overrides (and `extra`
    /// ones, e.g. a search step's rate), exactly as `brokerbench run` will.
    pub fn specs(
        &self,
        families: &[&dyn DriverSchema],
        study: &Study,
        extra: &[String],
    ) -> Result<Specs, SpecError> {
        let name = format!("{} (inline)", study.file.display());
        let mut overrides = self.overrides.clone();
        overrides.extend(extra.iter().cloned());
        load_specs_from(
            families,
            spec_input(&self.workload, &name),
            spec_input(&self.driver, &name),
            &overrides,
        )
    }
}

fn spec_input<'a>(input: &'a StudyInput, inline_name: &'a str) -> SpecInput<'a> {
    match input {
        StudyInput::Default => SpecInput::Default,
        StudyInput::File(p) => SpecInput::File(p),
        StudyInput::Inline(value) => SpecInput::Inline {
            name: inline_name,
            value,
        },
    }
}

/// A run's identity: a hash of its resolved workload and driver configuration (secrets
/// redacted) and its repetition. Two runs with the same key are the same measurement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RunKey(pub String);

impl RunKey {
    pub fn of(specs: &Specs, broker: &BrokerChoice, repetition: u32) -> RunKey {
        // Where the broker's metrics are read, and with which credentials, is not part of
        // the measurement: moving a password into the file must not make a run look new.
        let mut driver = specs.driver.redacted();
        if let Some(fields) = driver.as_object_mut() {
            fields.remove("broker_metrics");
        }
        let mut config = serde_json::json!({
            "workload": serde_json::to_value(&specs.workload).unwrap_or_default(),
            "driver": driver,
        });
        // Only a chosen broker joins the key: the keys of studies that choose none stay as
        // they were, so their folders resume.
        if broker.is_set() {
            config["broker"] = serde_json::to_value(broker).unwrap_or_default();
        }
        // serde_json's maps are sorted by key, so this text is canonical.
        let text = config.to_string();
        RunKey(format!("{:016x}-r{repetition}", fnv1a(text.as_bytes())))
    }
}

impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// `path=value` for `--set`, with the value written so that `--set` reads back the same
/// YAML value (a string that looks like a number stays a string: `acks="0"`).
pub fn assignment(path: &str, value: &Value) -> String {
    let plain = match value {
        Value::String(s) => {
            let reads_back = brokerbench_model::yaml::from_str::<Value>(s)
                .map(|v| v == *value)
                .unwrap_or(false);
            reads_back.then(|| s.clone())
        }
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let text = plain.unwrap_or_else(|| serde_json::to_string(value).unwrap_or_default());
    format!("{path}={text}")
}

/// Expands the study into its runs, in execution order. `cli_sets` are the command line's
/// `--set` overrides; `quick` shortens every run and keeps one repetition.
pub fn plan_runs(
    study: &Study,
    cli_sets: &[String],
    quick: bool,
) -> Result<Vec<PlannedRun>, StudyError> {
    check_cli_sets_off_axes(study, cli_sets)?;
    let base_broker = base_broker(study, cli_sets)?;
    let base = base_overrides(study, cli_sets, quick);
    let cells = grid_cells(study);
    let order = run_order(study, cells.len(), quick);
    order
        .into_iter()
        .map(|(c, repetition)| planned_run(study, c, repetition, &cells[c], &base, &base_broker))
        .collect()
}

/// Checks no `--set` of the command line sets a path one of the study's axes varies.
fn check_cli_sets_off_axes(study: &Study, cli_sets: &[String]) -> Result<(), StudyError> {
    for assignment in cli_sets {
        let key = set_key(assignment);
        if let Some(axis) = study.axes.iter().find(|a| a.paths.iter().any(|p| p == key)) {
            return Err(StudyError::Field {
                file: "--set".into(),
                field: key.to_string(),
                message: format!(
                    "`{key}` is an axis of the study ({}); it cannot also be set for every run",
                    axis.name()
                ),
            });
        }
    }
    Ok(())
}

/// The managed broker every run starts from: the study's `broker:`, changed by the command
/// line's `--set broker.*`.
fn base_broker(study: &Study, cli_sets: &[String]) -> Result<BrokerChoice, StudyError> {
    let mut base_broker = study.broker.clone();
    for assignment in cli_sets.iter().filter(|s| is_broker_path(set_key(s))) {
        let (path, text) = assignment.split_once('=').unwrap_or((assignment, ""));
        let value = brokerbench_model::field::parse_scalar(text.trim());
        base_broker
            .set(path.trim(), &value)
            .map_err(|(field, message)| StudyError::Field {
                file: "--set".into(),
                field,
                message,
            })?;
    }
    Ok(base_broker)
}

/// The `--set` overrides every run starts from, in the order applied: the study's `set:`
/// (but `rate: find`), `--quick`'s, then the command line's own (but the broker's and
/// `rate=find`).
fn base_overrides(study: &Study, cli_sets: &[String], quick: bool) -> Vec<String> {
    let mut base = Vec::new();
    for (path, value) in &study.set {
        if path == "rate" && matches!(value, Value::String(s) if s == "find") {
            continue; // the search sets each step's rate
        }
        base.push(assignment(path, value));
    }
    // The command line's own settings win over --quick's.
    if quick {
        base.extend(QUICK_SETS.iter().map(|s| s.to_string()));
        base.extend(quick_room_for_faults(study));
    }
    base.extend(
        cli_sets
            .iter()
            .filter(|s| !is_rate_find(s) && !is_broker_path(set_key(s)))
            .cloned(),
    );
    base
}

/// A quick run long enough for the study's faults (in `set:` or on an axis): 5 s past the
/// latest end of one (`at` plus its `for` or `restart_after`), so that each is measured and
/// over before the next run starts on the same nodes.
fn quick_room_for_faults(study: &Study) -> Option<String> {
    let set = study
        .set
        .iter()
        .filter(|(path, _)| path == "faults")
        .map(|(_, value)| value);
    let axes = study.axes.iter().flat_map(|axis| {
        let column = axis.paths.iter().position(|p| p == "faults");
        axis.points
            .iter()
            .filter_map(move |point| point.get(column?))
    });
    let latest = set.chain(axes).flat_map(fault_ends).max()?;
    Some(format!("duration={}s", latest.as_secs() + 5))
}

/// When each fault of a `faults` value ends: its `at` plus its `for` or `restart_after`, read
/// by the workload's own fault parser (a list it refuses gives none: the run's check says why).
fn fault_ends(faults: &Value) -> Vec<std::time::Duration> {
    use brokerbench_model::faults::{check_faults, RawFault};
    let Ok(raw) = serde_json::from_value::<Vec<RawFault>>(faults.clone()) else {
        return Vec::new();
    };
    let faults = check_faults(&raw, std::time::Duration::MAX).unwrap_or_default();
    faults
        .iter()
        .map(|f| f.at + f.lasts.or(f.restart_after).unwrap_or_default())
        .collect()
}

/// The grid's cells in grid order, each as (axis, point) pairs, one per axis.
fn grid_cells(study: &Study) -> Vec<Vec<(usize, usize)>> {
    // Cells: the last axis varies fastest.
    let mut cells: Vec<Vec<(usize, usize)>> = vec![Vec::new()];
    for (a, axis) in study.axes.iter().enumerate() {
        let mut next = Vec::with_capacity(cells.len() * axis.points.len());
        for prefix in &cells {
            for p in 0..axis.points.len() {
                let mut cell = prefix.clone();
                cell.push((a, p));
                next.push(cell);
            }
        }
        cells = next;
    }
    cells
}

/// The runs as (cell, repetition) pairs, in the study's order, over `cell_count` cells.
fn run_order(study: &Study, cell_count: usize, quick: bool) -> Vec<(usize, u32)> {
    let repetitions = if quick { 1 } else { study.repetitions };
    let mut order: Vec<(usize, u32)> = match study.order {
        Order::Sequential => (0..cell_count)
            .flat_map(|c| (1..=repetitions).map(move |r| (c, r)))
            .collect(),
        Order::Interleaved | Order::Shuffled => (1..=repetitions)
            .flat_map(|r| (0..cell_count).map(move |c| (c, r)))
            .collect(),
    };
    if study.order == Order::Shuffled {
        shuffle(&mut order, study.seed);
    }
    order
}

/// Repetition `repetition` of cell `c`, whose (axis, point) pairs are `cell`: the overrides
/// and broker every run starts from (`base`, `base_broker`), then the cell's axis values.
fn planned_run(
    study: &Study,
    c: usize,
    repetition: u32,
    cell: &[(usize, usize)],
    base: &[String],
    base_broker: &BrokerChoice,
) -> Result<PlannedRun, StudyError> {
    let mut run = PlannedRun {
        cell: c,
        repetition,
        values: Vec::new(),
        workload: study.workload.clone(),
        driver: study.driver.clone(),
        overrides: base.to_vec(),
        broker: base_broker.clone(),
    };
    for &(a, p) in cell {
        let axis = &study.axes[a];
        for (path, value) in axis.paths.iter().zip(&axis.points[p]) {
            run.set_axis(path, value)
                .map_err(|(field, message)| StudyError::Field {
                    file: study.file.display().to_string(),
                    field: format!("axes.{}", field),
                    message,
                })?;
        }
    }
    Ok(run)
}

impl PlannedRun {
    /// Takes an axis's value: a workload or driver file, the managed broker's, or a `--set`.
    fn set_axis(&mut self, path: &str, value: &Value) -> Result<(), (String, String)> {
        self.values.push((path.to_string(), value.clone()));
        match (path, value) {
            ("workload", Value::String(f)) => self.workload = StudyInput::File(f.into()),
            ("driver", Value::String(f)) => self.driver = StudyInput::File(f.into()),
            _ if is_broker_path(path) => self.broker.set(path, value)?,
            _ => self.overrides.push(assignment(path, value)),
        }
        Ok(())
    }
}

/// The path a `--set` assignment sets.
fn set_key(assignment: &str) -> &str {
    assignment
        .split_once('=')
        .map_or(assignment, |(k, _)| k)
        .trim()
}

/// Whether a `--set` asks for the maximum-sustainable-throughput search.
pub fn is_rate_find(assignment: &str) -> bool {
    assignment
        .split_once('=')
        .is_some_and(|(k, v)| k.trim() == "rate" && v.trim() == "find")
}

/// Fisher–Yates with splitmix64: the same seed gives the same order on every machine.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn study(text: &str) -> Study {
        Study::parse(Path::new("/tmp/s.yaml"), text).unwrap()
    }

    #[test]
    fn the_grid_is_first_axis_outermost_and_interleaved_by_default() {
        let s = study("name: t\naxes:\n  rate: [100, 200]\n  producer_config.acks: [\"0\", all]\nrepetitions: 2\n");
        let runs = plan_runs(&s, &[], false).unwrap();
        let labels: Vec<String> = runs
            .iter()
            .map(|r| format!("{} r{}", r.cell_label(), r.repetition))
            .collect();
        assert_eq!(
            labels,
            [
                "rate=100, producer_config.acks=0 r1",
                "rate=100, producer_config.acks=all r1",
                "rate=200, producer_config.acks=0 r1",
                "rate=200, producer_config.acks=all r1",
                "rate=100, producer_config.acks=0 r2",
                "rate=100, producer_config.acks=all r2",
                "rate=200, producer_config.acks=0 r2",
                "rate=200, producer_config.acks=all r2",
            ]
        );
        assert!(runs[0]
            .overrides
            .contains(&"producer_config.acks=\"0\"".to_string()));
        assert!(runs[1]
            .overrides
            .contains(&"producer_config.acks=all".to_string()));
    }

    #[test]
    fn a_quick_run_keeps_room_for_the_latest_fault_and_a_cell_label_is_one_line() {
        let s = study("name: t\naxes:\n  faults:\n    - [{at: 5s, action: kill, node: 1}]\n    - [{at: 12s, action: pause, node: 1, for: 2s}]\n");
        let runs = plan_runs(&s, &[], true).unwrap();
        let durations: Vec<&String> = runs[0]
            .overrides
            .iter()
            .filter(|o| o.starts_with("duration="))
            .collect();
        assert_eq!(
            durations,
            ["duration=2s", "duration=19s"],
            "the last one wins"
        );
        assert_eq!(
            runs[1].cell_label(),
            "faults=[{at: 12s, action: pause, node: 1, for: 2s}]"
        );
        let plain = study("name: t\naxes: {rate: [1]}\n");
        let quick = &plan_runs(&plain, &[], true).unwrap()[0].overrides;
        let durations: Vec<&String> = quick
            .iter()
            .filter(|o| o.starts_with("duration="))
            .collect();
        assert_eq!(durations, ["duration=2s"], "no faults, no room");
    }

    #[test]
    fn sequential_and_shuffled_orders() {
        let s = study("name: t\naxes: {rate: [1, 2, 3]}\nrepetitions: 2\norder: sequential\n");
        let runs = plan_runs(&s, &[], false).unwrap();
        let order: Vec<(usize, u32)> = runs.iter().map(|r| (r.cell, r.repetition)).collect();
        assert_eq!(order, [(0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]);
        let a = study(
            "name: t\naxes: {rate: [1, 2, 3, 4, 5]}\nrepetitions: 3\norder: shuffled\nseed: 7\n",
        );
        let b = study(
            "name: t\naxes: {rate: [1, 2, 3, 4, 5]}\nrepetitions: 3\norder: shuffled\nseed: 8\n",
        );
        let pa: Vec<(usize, u32)> = plan_runs(&a, &[], false)
            .unwrap()
            .iter()
            .map(|r| (r.cell, r.repetition))
            .collect();
        let pa2: Vec<(usize, u32)> = plan_runs(&a, &[], false)
            .unwrap()
            .iter()
            .map(|r| (r.cell, r.repetition))
            .collect();
        let pb: Vec<(usize, u32)> = plan_runs(&b, &[], false)
            .unwrap()
            .iter()
            .map(|r| (r.cell, r.repetition))
            .collect();
        assert_eq!(pa, pa2, "the same seed gives the same order");
        assert_ne!(pa, pb, "another seed gives another order");
        let mut sorted = pa.clone();
        sorted.sort();
        let all: Vec<(usize, u32)> = (0..5).flat_map(|c| (1..=3).map(move |r| (c, r))).collect();
        assert_eq!(sorted, all, "every run exactly once");
    }

    #[test]
    fn quick_keeps_one_repetition_and_shortens_runs() {
        let s = study("name: t\naxes: {rate: [1, 2]}\nrepetitions: 5\n");
        let runs = plan_runs(&s, &[], true).unwrap();
        assert_eq!(runs.len(), 2);
        assert!(runs[0].overrides.iter().any(|o| o == "duration=2s"));
        // A --set of the command line comes after --quick's, so it wins.
        let runs = plan_runs(&s, &["duration=1s".into()], true).unwrap();
        let at = |text: &str| runs[0].overrides.iter().position(|o| o == text).unwrap();
        assert!(at("duration=1s") > at("duration=2s"));
    }

    #[test]
    fn zipped_axes_vary_together() {
        let s = study("name: t\naxes:\n  message_size+rate: [[100B, 10], [1KiB, 20]]\n");
        let runs = plan_runs(&s, &[], false).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].cell_label(), "message_size=1KiB, rate=20");
    }

    #[test]
    fn cell_labels_hide_credentials() {
        let s = study(
            "name: t\naxes:\n  servers: [\"nats://u:pw1@h:1\", \"nats://t0k@h:1\"]\n  broker_metrics.password: [pw2]\n",
        );
        let labels: Vec<String> = plan_runs(&s, &[], false)
            .unwrap()
            .iter()
            .map(PlannedRun::cell_label)
            .collect();
        assert_eq!(
            labels,
            [
                "servers=nats://u:***@h:1, broker_metrics.password=***",
                "servers=nats://***@h:1, broker_metrics.password=***"
            ]
        );
    }

    #[test]
    fn keys_follow_the_resolved_configuration() {
        let s = study("name: t\naxes: {rate: [100, 200]}\nrepetitions: 2\n");
        let runs = plan_runs(&s, &[], false).unwrap();
        let key = |r: &PlannedRun| {
            RunKey::of(
                &r.specs(&[&brokerbench_driver::mock::MockSchema], &s, &[])
                    .unwrap(),
                &r.broker,
                r.repetition,
            )
        };
        assert_ne!(key(&runs[0]), key(&runs[1]));
        assert_ne!(key(&runs[0]), key(&runs[2]), "repetitions differ");
        assert_eq!(runs[0].cell, runs[2].cell);
        // The same configuration reached another way has the same key.
        let t = study("name: other\nset: {rate: 100}\nrepetitions: 2\n");
        let same = &plan_runs(&t, &[], false).unwrap()[0];
        assert_eq!(
            key(&runs[0]),
            RunKey::of(
                &same
                    .specs(&[&brokerbench_driver::mock::MockSchema], &t, &[])
                    .unwrap(),
                &same.broker,
                1
            )
        );
    }

    #[test]
    fn strings_that_look_like_numbers_stay_strings() {
        assert_eq!(assignment("a", &Value::String("0".into())), "a=\"0\"");
        assert_eq!(assignment("a", &Value::String("all".into())), "a=all");
        assert_eq!(
            assignment("a", &brokerbench_model::yaml::from_str("10000").unwrap()),
            "a=10000"
        );
        assert_eq!(
            assignment(
                "a",
                &brokerbench_model::yaml::from_str("{kind: sensor}").unwrap()
            ),
            "a={\"kind\":\"sensor\"}"
        );
    }
}
