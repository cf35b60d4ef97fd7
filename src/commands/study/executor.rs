//! Carries out one planned run (or search step) as a `brokerbench run` child process, unless an
//! earlier invocation completed it, and records what happened.

use super::*;

pub(super) struct Executor<'a> {
    pub(super) study: &'a Study,
    pub(super) dir: &'a Path,
    pub(super) inputs: Inputs,
    pub(super) no_monitor: bool,
    pub(super) signals: Signals,
    /// Records of an earlier invocation on this folder.
    pub(super) earlier: Vec<RunRecord>,
    /// Runs carried out by this invocation, and the time they took (for the ETA).
    pub(super) executed: usize,
    pub(super) time_spent: Duration,
    pub(super) search: Option<FindSpec>,
    pub(super) quick: bool,
    /// The family and broker this invocation last started for a cell that chose one.
    pub(super) broker_now: Option<(&'static str, brokerbench_study::BrokerChoice)>,
    /// The live dashboard (`--dashboard`), told which run is going.
    pub(super) dashboard: Option<Arc<brokerbench_report::Dashboard>>,
}

impl Executor<'_> {
    /// Runs one planned run (or search step), unless an earlier invocation completed it.
    pub(super) fn run(
        &mut self,
        run: &PlannedRun,
        key: &RunKey,
        step: Option<(u32, u32, f64)>,
        state: &mut StudyState,
    ) -> anyhow::Result<RunRecord> {
        let name = run_name(run, step);
        let results = format!("runs/{name}");
        let folder = self.dir.join(&results);
        let mut record = planned_record(run, key, step, results);
        // Done before? Identified by the key, confirmed by the run's own manifest.
        if let Some(done) = self.completed_before(key) {
            let mut kept = done.clone();
            kept.status = "complete".into();
            kept.step = record.step;
            return Ok(kept);
        }
        if self.signals.received() > 0 {
            record.status = "interrupted".into();
            return Ok(record);
        }
        let restart = self.executed > 0 && self.study.between_runs.broker == BrokerBetween::Restart;
        if self.executed > 0 {
            self.between_runs(run)?;
        }
        if let Err(error) = self.ensure_broker(run, restart) {
            // The cell's broker did not start: the run failed before it began.
            record.status = "failed".into();
            record.error = Some(format!("{error:#}"));
            return Ok(record);
        }
        let log_path = self.dir.join("runs").join(format!("{name}.log"));
        set_aside(&folder, &log_path)?;
        // Recorded as running before it starts: a study killed now knows where to look.
        state.runs.push(record.clone());
        write_state_file(self.dir, state)?;
        state.runs.pop();

        let log = fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let rate = step.map(|(_, _, rate)| rate);
        let command = self.run_command(run, rate, &folder, log)?;
        if let Some(dashboard) = &self.dashboard {
            dashboard.running(running_text(run, step), folder.clone());
        }
        let started = Instant::now();
        let status = spawn_and_wait(command, self.inputs.driver.as_deref(), &self.signals)?;
        self.executed += 1;
        self.time_spent += started.elapsed();
        self.record_outcome(&mut record, state, &folder, &log_path, status);
        Ok(record)
    }

    /// The record of an earlier invocation that completed the run of `key`, as its own
    /// manifest confirms.
    fn completed_before(&self, key: &RunKey) -> Option<&RunRecord> {
        self.earlier.iter().rev().find(|r| {
            r.key == *key && manifest_status(&self.dir.join(&r.results)) == Some("complete".into())
        })
    }

    /// The `brokerbench run` command of one run (a search step at `rate`): its workload and
    /// driver, overrides and results `folder`, with its output to `log`.
    fn run_command(
        &self,
        run: &PlannedRun,
        rate: Option<f64>,
        folder: &Path,
        log: fs::File,
    ) -> anyhow::Result<Command> {
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("run");
        match (&self.inputs.workload, &run.workload) {
            (Some(inline), _) => {
                command.arg(inline);
            }
            (None, brokerbench_study::StudyInput::File(p)) => {
                command.arg(p);
            }
            _ => {}
        }
        match (&self.inputs.driver, &run.driver) {
            (Some(_), _) => {
                command
                    .arg("--driver")
                    .arg(super::super::run_inputs::STDIN_DRIVER);
            }
            (None, brokerbench_study::StudyInput::File(p)) => {
                command.arg("--driver").arg(p);
            }
            _ => {}
        }
        for o in &run.overrides {
            command.arg("--set").arg(o);
        }
        if let Some(rate) = rate {
            for o in step_overrides(self.search.as_ref(), rate, self.quick) {
                command.arg("--set").arg(o);
            }
        }
        command.arg("--out").arg(folder).arg("--quiet");
        if self.no_monitor {
            command.arg("--no-monitor");
        }
        command.stdout(log.try_clone()?).stderr(log);
        Ok(command)
    }

    /// What a finished run left: its exit code, its status by its manifest (or the
    /// interruption), its log moved into its folder, the broker it ran against (the first
    /// known is the study's) and, for a failed run, why.
    fn record_outcome(
        &self,
        record: &mut RunRecord,
        state: &mut StudyState,
        folder: &Path,
        log_path: &Path,
        status: std::process::ExitStatus,
    ) {
        record.exit_code = status.code();
        let interrupted = self.signals.received() > 0 || status.code() == Some(130);
        record.status = match manifest_status(folder).as_deref() {
            Some("complete") => "complete".into(),
            _ if interrupted => "interrupted".into(),
            _ => "failed".into(),
        };
        if folder.exists() {
            let _ = fs::rename(log_path, folder.join("run.log"));
            if let Ok(manifest) = read_json(&folder.join(brokerbench_report::MANIFEST_FILE)) {
                note_broker(&mut state.broker, broker_of(&manifest));
                record.error = manifest
                    .get("error")
                    .and_then(Json::as_str)
                    .map(str::to_string);
            }
        }
        if record.status == "failed" && record.error.is_none() {
            let log = fs::read_to_string(folder.join("run.log"))
                .or_else(|_| fs::read_to_string(log_path))
                .unwrap_or_default();
            record.error = log
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .map(|l| l.trim_start_matches("error:").trim().to_string())
                .or_else(|| Some(format!("the run exited with {status}")));
        }
    }

    pub(super) fn between_runs(&self, run: &PlannedRun) -> anyhow::Result<()> {
        // A smoke test (--quick) does not wait for the machine to settle.
        let pause = if self.quick {
            Duration::ZERO
        } else {
            self.study.between_runs.cooldown
        };
        let until = Instant::now() + pause;
        while Instant::now() < until && self.signals.received() == 0 {
            std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
        // A chosen broker restarts with its nodes and settings: `ensure_broker`.
        if self.study.between_runs.broker == BrokerBetween::Restart
            && self.signals.received() == 0
            && !run.broker.is_set()
        {
            let specs = run
                .specs(&REGISTRY.schemas(), self.study, &[])
                .map_err(|e| BadInput(e.to_string()))?;
            if let Some(family) = managed_family(&specs) {
                for action in ["down", "up"] {
                    let out = Command::new(std::env::current_exe()?)
                        .args(["broker", action, family])
                        .stdin(std::process::Stdio::null())
                        .output()?;
                    if !out.status.success() {
                        anyhow::bail!(
                            "between runs: `brokerbench broker {action} {family}` failed: {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// One line per finished run: index, cell, repetition, headline numbers, ETA.
    pub(super) fn progress(
        &self,
        index: usize,
        total: usize,
        run: &PlannedRun,
        record: &RunRecord,
    ) {
        let width = total.to_string().len();
        let step = record
            .step
            .map(|s| format!(" step {s}"))
            .unwrap_or_default();
        let what = if self.search.is_some() { "search " } else { "" };
        let values = if run.values.is_empty() {
            String::new()
        } else {
            format!(" ({})", run.cell_label())
        };
        let mut line = format!(
            "[{what}{index:>width$}/{total}] cell {} rep {}{step}{values}: ",
            run.cell + 1,
            run.repetition,
        );
        match record.status.as_str() {
            "complete" => line.push_str(&self.headline_text(record)),
            other => {
                line.push_str(&other.to_uppercase());
                if let Some(e) = &record.error {
                    line.push_str(&format!(": {e}"));
                }
            }
        }
        if self.executed > 0
            && self.search.is_none()
            && index < total
            && record.status != "interrupted"
        {
            line.push_str(&format!(
                "; ETA {}",
                human_duration(self.time_left(total - index))
            ));
        }
        println!("{line}");
    }

    /// A complete run's headline numbers for its progress line: offered rate (of a step),
    /// throughput, p99 latencies, loss, and whether a step was sustained.
    fn headline_text(&self, record: &RunRecord) -> String {
        let mut line = String::new();
        let summary = read_json(
            &self
                .dir
                .join(&record.results)
                .join(brokerbench_report::SUMMARY_FILE),
        )
        .unwrap_or_default();
        let v = |p: &str| metrics::value(&summary, p);
        if let Some(target) = v("target_rate").filter(|_| record.step.is_some()) {
            line.push_str(&format!("offered {} → ", format_rate(target)));
        }
        match v("total.acknowledged") {
            Some(a) if a == 0.0 && v("total.sent").unwrap_or(0.0) > 0.0 => line.push_str(&format!(
                "{} msg/s sent (unconfirmed), {} received",
                format_rate(v("throughput.sent_per_s").unwrap_or(0.0)),
                format_rate(v("throughput.received_per_s").unwrap_or(0.0))
            )),
            _ => line.push_str(&format!(
                "{} msg/s acknowledged",
                format_rate(v("throughput.acknowledged_per_s").unwrap_or(0.0))
            )),
        }
        for (label, path) in [
            ("publish p99", "latency.publish.p99_ns"),
            ("e2e p99", "latency.end_to_end.p99_ns"),
        ] {
            if let Some(ns) = v(path) {
                line.push_str(&format!(", {label} {}", format_nanos(ns as u64)));
            }
        }
        let lost = v("integrity.lost").unwrap_or(0.0);
        if lost > 0.0 {
            line.push_str(&format!(", LOST {lost:.0}"));
        }
        if let Some(ok) = record.sustainable {
            line.push_str(if ok {
                " — sustained"
            } else {
                " — NOT sustained"
            });
            if let Some(reason) = &record.reason {
                line.push_str(&format!(": {reason}"));
            }
        }
        line
    }

    /// The time the next `runs` runs should take, each as long as the mean so far, with
    /// the cooldown after it.
    fn time_left(&self, runs: usize) -> Duration {
        let cooldown = if self.quick {
            Duration::ZERO
        } else {
            self.study.between_runs.cooldown
        };
        let per_run = self.time_spent / self.executed as u32 + cooldown;
        per_run * runs as u32
    }
}

/// What the dashboard says is running: the cell, its settings, the repetition and the
/// search's step.
fn running_text(run: &PlannedRun, step: Option<(u32, u32, f64)>) -> String {
    let mut text = format!(
        "cell {} ({}), repetition {}",
        run.cell + 1,
        run.cell_label(),
        run.repetition
    );
    if let Some((s, _, rate)) = step {
        text += &format!(", search step {s} at {} msg/s", format_rate(rate));
    }
    text
}

/// A run's name, its folder's under `runs/`: cell and repetition, and the step (and its
/// attempt after the first) of a search.
fn run_name(run: &PlannedRun, step: Option<(u32, u32, f64)>) -> String {
    match step {
        None => format!("c{:03}-r{}", run.cell + 1, run.repetition),
        Some((s, 1, _)) => format!("c{:03}-r{}-s{:02}", run.cell + 1, run.repetition, s),
        Some((s, attempt, _)) => format!(
            "c{:03}-r{}-s{:02}-t{attempt}",
            run.cell + 1,
            run.repetition,
            s
        ),
    }
}

/// The record of a run about to start, its results in the folder `results`.
fn planned_record(
    run: &PlannedRun,
    key: &RunKey,
    step: Option<(u32, u32, f64)>,
    results: String,
) -> RunRecord {
    RunRecord {
        key: key.clone(),
        cell: run.cell,
        repetition: run.repetition,
        values: run
            .values
            .iter()
            .map(|(p, v)| (p.clone(), redacted_value(p, v)))
            .collect(),
        step: step.map(|(s, _, _)| s),
        sustainable: None,
        reason: None,
        status: "running".into(),
        results,
        exit_code: None,
        error: None,
        headline: Vec::new(),
    }
}

/// Moves an earlier, unfinished attempt (and its log) out of the way: kept, never deleted.
pub(super) fn set_aside(folder: &Path, log: &Path) -> anyhow::Result<()> {
    if !folder.exists() {
        return Ok(());
    }
    for n in 1.. {
        let aside = PathBuf::from(format!("{}.try{n}", folder.display()));
        if !aside.exists() {
            fs::rename(folder, &aside)
                .with_context(|| format!("moving {} aside", folder.display()))?;
            if log.exists() {
                let _ = fs::rename(log, aside.join("run.log"));
            }
            return Ok(());
        }
    }
    Ok(())
}

/// Starts the run in its own process group (so the terminal's Ctrl-C reaches only the study,
/// which forwards it once), tied to the study's life (a killed study kills its run); `input`
/// is written to its standard input.
pub(super) fn spawn_and_wait(
    mut command: Command,
    input: Option<&str>,
    signals: &Signals,
) -> anyhow::Result<std::process::ExitStatus> {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.stdin(match input {
        Some(_) => std::process::Stdio::piped(),
        None => std::process::Stdio::null(),
    });
    let mut child = command.spawn().context("starting brokerbench run")?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write as _;
        // The run reads it before anything else; one that exits before reading it says why
        // in its log (the failed write is then of no consequence).
        let _ = stdin.write_all(text.as_bytes());
    }
    let mut forwarded = 0;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let received = signals.received();
        while forwarded < received {
            // SAFETY: signalling a child process we started and have not reaped.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGINT);
            }
            forwarded += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(super) fn manifest_status(folder: &Path) -> Option<String> {
    read_json(&folder.join(brokerbench_report::MANIFEST_FILE))
        .ok()?
        .get("status")?
        .as_str()
        .map(str::to_string)
}

/// The study's broker: the first run's; marked `several` when a later run's family is another.
fn note_broker(study: &mut Option<Json>, run: Option<Json>) {
    match (study.as_mut(), run) {
        (None, run) => *study = run,
        (Some(first), Some(run)) => {
            let family = |b: &Json| b["family"].as_str().map(String::from);
            if let (Some(a), Some(b)) = (family(first), family(&run)) {
                if a != b {
                    first["several"] = Json::Bool(true);
                }
            }
        }
        (Some(_), None) => {}
    }
}

/// The broker a run's manifest names, with the driver's family (`kafka`) beside its version
/// and address; None when the manifest names none.
fn broker_of(manifest: &Json) -> Option<Json> {
    let mut broker = manifest.get("broker").cloned().filter(|b| b.is_object())?;
    if let Some(family) = manifest["driver"]["driver"].as_str() {
        broker["family"] = Json::from(family);
    }
    Some(broker)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(family: Option<&str>) -> Json {
        let mut m = json!({"broker": {"version": "1", "address": "127.0.0.1:1"}, "driver": {}});
        if let Some(f) = family {
            m["driver"]["driver"] = json!(f);
        }
        m
    }

    #[test]
    fn the_study_broker_is_the_first_runs_and_says_when_another_family_ran() {
        let mut broker = None;
        note_broker(&mut broker, broker_of(&manifest(Some("kafka"))));
        note_broker(&mut broker, broker_of(&manifest(Some("kafka"))));
        note_broker(&mut broker, broker_of(&manifest(None)));
        let first = broker.clone().unwrap();
        assert_eq!(first["family"], "kafka");
        assert!(first.get("several").is_none(), "{first}");
        note_broker(&mut broker, broker_of(&manifest(Some("nats"))));
        assert_eq!(broker.unwrap()["several"], true);
    }
}
