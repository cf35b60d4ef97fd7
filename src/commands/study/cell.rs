//! One cell of the study: a grid run, or a search for the highest rate that holds, with the
//! study's records written after every run.

use super::*;

impl Executor<'_> {
    /// One grid run; its status (`complete`, `failed`, `interrupted`, …).
    pub(super) fn grid_run(
        &mut self,
        run: &PlannedRun,
        key: &RunKey,
        (index, total): (usize, usize),
        state: &mut StudyState,
    ) -> anyhow::Result<String> {
        let record = self.run(run, key, None, state)?;
        let status = record.status.clone();
        self.progress(index, total, run, &record);
        state.runs.push(record);
        write_state(self.dir, state, false)?;
        Ok(status)
    }

    /// One search: a run per step, each judged, search.json rewritten with the steps so far
    /// after each (beside the cells' `earlier` searches); the search and its status
    /// (`complete`, `failed` or `interrupted`).
    pub(super) fn search_cell(
        &mut self,
        spec: &FindSpec,
        run: &PlannedRun,
        (index, total): (usize, usize),
        state: &mut StudyState,
        earlier: &[Json],
    ) -> anyhow::Result<(Search, &'static str)> {
        let mut status = "complete";
        let dir = self.dir;
        let found = drive_observed(
            spec,
            |rate, step, attempt| -> anyhow::Result<Option<Step>> {
                let mut record = self.search_step(spec, run, (step, attempt, rate), state)?;
                if record.status != "complete" {
                    status = if record.status == "interrupted" {
                        "interrupted"
                    } else {
                        "failed"
                    };
                    self.progress(index, total, run, &record);
                    state.runs.push(record);
                    return Ok(None);
                }
                let measured = judged(spec, rate, attempt, &mut record, self.dir)?;
                self.progress(index, total, run, &record);
                state.runs.push(record);
                write_state(self.dir, state, true)?;
                Ok(Some(measured))
            },
            |so_far| {
                let mut searches = earlier.to_vec();
                searches.push(search_json(run, so_far, "running"));
                write_search(dir, spec, &searches)?;
                refresh_report(dir);
                Ok(())
            },
        )?;
        Ok((found, status))
    }

    /// The run of one search step (a retry is a run of its own, with a key of its own).
    fn search_step(
        &mut self,
        spec: &FindSpec,
        run: &PlannedRun,
        (step, attempt, rate): (u32, u32, f64),
        state: &mut StudyState,
    ) -> anyhow::Result<RunRecord> {
        let sets = step_overrides(Some(spec), rate, self.quick);
        let specs = run
            .specs(&REGISTRY.schemas(), self.study, &sets)
            .map_err(|e| BadInput(explain_spec_error(self.study, run, e)))?;
        let key = match attempt {
            1 => RunKey::of(&specs, &run.broker, run.repetition),
            n => RunKey(format!(
                "{}-t{n}",
                RunKey::of(&specs, &run.broker, run.repetition)
            )),
        };
        self.run(run, &key, Some((step, attempt, rate)), state)
    }
}

/// A completed step's run judged against the search's limits: the record says whether the
/// rate held and why not; the step is what the search goes on from.
fn judged(
    spec: &FindSpec,
    rate: f64,
    attempt: u32,
    record: &mut RunRecord,
    dir: &Path,
) -> anyhow::Result<Step> {
    let folder = dir.join(&record.results);
    let summary = read_json(&folder.join(brokerbench_report::SUMMARY_FILE))?;
    let backlog =
        backlog_points(&folder.join(brokerbench_report::TIMESERIES_FILE)).unwrap_or_default();
    let verdict = judge(spec, rate, &summary, &backlog);
    record.sustainable = Some(verdict.sustainable);
    record.reason = (!verdict.reasons.is_empty()).then(|| verdict.reasons.join("; "));
    let measured = Step::new(rate, &summary, verdict, record.results.clone());
    if spec.will_retry(&measured, attempt) {
        let why = record.reason.take().unwrap_or_default();
        record.reason = Some(format!("{why}; nearly held: measured again"));
    }
    Ok(measured)
}
