//! The results folder of one run, written as the run goes: manifest.json at once (marked
//! `interrupted`), one timeseries.csv row and one line per HdrHistogram log each second, and
//! summary.json plus the final manifest at the end. A crash leaves every completed second on
//! disk and a manifest that says the run did not end normally.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use brokerbench_model::faults::FaultMarks;
use brokerbench_model::{IntervalRow, RunObserver, RunStatus, Summary, WindowHistograms};

use crate::export::{Export, SummaryJson};
use crate::hlog::HistogramLogWriter;
use crate::manifest::Manifest;
use crate::timeseries::TimeseriesWriter;
use crate::ReportError;

/// What was run and how it ended.
pub const MANIFEST_FILE: &str = "manifest.json";
/// One row per second.
pub const TIMESERIES_FILE: &str = "timeseries.csv";
/// Per-second publish latency histograms (HdrHistogram interval log).
pub const PUBLISH_HLOG_FILE: &str = "publish.hlog";
/// Per-second end-to-end latency histograms (HdrHistogram interval log).
pub const E2E_HLOG_FILE: &str = "e2e.hlog";
/// File name of the measurement window's whole histograms (tagged).
pub const WINDOW_HLOG_FILE: &str = "window.hlog";

/// An open results folder; feed it interval rows as a [`RunObserver`], then call
/// [`ResultsFolder::finish`] or [`ResultsFolder::mark_failed`]. Dropping it without either
/// leaves the manifest marked `interrupted`, which is the truth.
pub struct ResultsFolder {
    dir: PathBuf,
    manifest: Manifest,
    timeseries: TimeseriesWriter<BufWriter<File>>,
    publish_log: HistogramLogWriter<BufWriter<File>>,
    e2e_log: HistogramLogWriter<BufWriter<File>>,
    /// First write error while observing; returned by `finish` because observers cannot fail.
    first_error: Option<ReportError>,
    /// The workload's faults as they happen, for timeseries.csv's `faults` column.
    faults: Option<FaultMarks>,
}

impl ResultsFolder {
    /// Creates the folder (it must not exist or be empty), writes manifest.json with status
    /// `interrupted`, and starts timeseries.csv, publish.hlog and e2e.hlog with their headers.
    pub fn create(dir: &Path, mut manifest: Manifest) -> Result<ResultsFolder, ReportError> {
        prepare_empty_folder(dir)?;
        manifest.prepare_for_start();
        write_manifest(dir, &manifest)?;

        let open = |name: &str| {
            let path = dir.join(name);
            File::create(&path)
                .map(BufWriter::new)
                .map_err(|e| ReportError::write(&path, e))
        };
        let finish_header = |name: &str, result: io::Result<()>| {
            result.map_err(|e| ReportError::write(dir.join(name), e))
        };

        let mut timeseries = TimeseriesWriter::new(open(TIMESERIES_FILE)?)
            .map_err(|e| ReportError::write(dir.join(TIMESERIES_FILE), e))?;
        finish_header(TIMESERIES_FILE, timeseries.flush())?;

        let version = &manifest.tool.version;
        let comment = |what: &str| {
            format!(
                "[brokerbench {version}, run {}: {what}; values in ns, Interval_Max in ms]",
                manifest.run_id
            )
        };
        let start = manifest.started_at_ns;
        let mut publish_log = HistogramLogWriter::new(
            open(PUBLISH_HLOG_FILE)?,
            start,
            &comment("publish latency = acknowledgement time - intended send time"),
        )
        .map_err(|e| ReportError::write(dir.join(PUBLISH_HLOG_FILE), e))?;
        finish_header(PUBLISH_HLOG_FILE, publish_log.flush())?;
        let mut e2e_log = HistogramLogWriter::new(
            open(E2E_HLOG_FILE)?,
            start,
            &comment("end-to-end latency = receive time - intended send time"),
        )
        .map_err(|e| ReportError::write(dir.join(E2E_HLOG_FILE), e))?;
        finish_header(E2E_HLOG_FILE, e2e_log.flush())?;

        Ok(ResultsFolder {
            dir: dir.to_path_buf(),
            manifest,
            timeseries,
            publish_log,
            e2e_log,
            first_error: None,
            faults: None,
        })
    }

    /// Marks each second of timeseries.csv with the faults under way in it.
    pub fn mark_faults(&mut self, marks: FaultMarks) {
        self.faults = Some(marks);
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The manifest as written (redacted, status `interrupted` while the run goes on).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Writes one more whole-run file (e.g. an HTML report) atomically; returns its path.
    pub fn write_export(
        &self,
        export: &dyn Export,
        summary: &Summary,
    ) -> Result<PathBuf, ReportError> {
        let path = self.dir.join(export.file_name());
        let bytes = export
            .bytes(summary)
            .map_err(|e| ReportError::write(&path, e))?;
        write_atomically(&path, &bytes)?;
        Ok(path)
    }

    /// Writes one more file of the results folder atomically; returns its path.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, ReportError> {
        let path = self.dir.join(name);
        write_atomically(&path, bytes)?;
        Ok(path)
    }

    /// Writes window.hlog: the measurement window's publish, end-to-end, service-time and
    /// schedule-lag histograms, whole, as tagged intervals (`Tag=publish`, …) of one log, so
    /// percentile spectra are drawn from exactly what the summary's percentiles come from.
    pub fn write_window_histograms(
        &self,
        histograms: &WindowHistograms,
        window_start_ns: u64,
        window_length_ns: u64,
    ) -> Result<PathBuf, ReportError> {
        let path = self.dir.join(WINDOW_HLOG_FILE);
        let mut bytes = Vec::new();
        let mut log = HistogramLogWriter::new(
            &mut bytes,
            self.manifest.started_at_ns,
            &format!(
                "[brokerbench {}, run {}: measurement window histograms, tagged publish, end_to_end, service_time, schedule_lag; values in ns, Interval_Max in ms]",
                self.manifest.tool.version, self.manifest.run_id
            ),
        )
        .map_err(|e| ReportError::write(&path, e))?;
        for (tag, h) in histograms.tagged() {
            log.write_tagged(tag, window_start_ns, window_length_ns, h)
                .map_err(|e| ReportError::write(&path, e))?;
        }
        drop(log);
        write_atomically(&path, &bytes)?;
        Ok(path)
    }

    /// Ends the run: writes summary.json and rewrites manifest.json with the summary's status
    /// and the end time (ns since the UNIX epoch). Returns the first error met while writing,
    /// including errors from earlier interval rows; every file is still attempted.
    pub fn finish(mut self, summary: &Summary, ended_at_ns: u64) -> Result<(), ReportError> {
        self.flush_all();
        let summary_result = self.write_export(&SummaryJson, summary).map(drop);
        self.remember(summary_result);
        self.manifest.end(summary.status, ended_at_ns, None);
        let manifest_result = write_manifest(&self.dir, &self.manifest);
        self.remember(manifest_result);
        self.first_error.map_or(Ok(()), Err)
    }

    /// Ends a run that could not produce a summary: rewrites manifest.json with status
    /// `failed`, the end time and `error`, which the caller must already have redacted.
    pub fn mark_failed(mut self, error: &str, ended_at_ns: u64) -> Result<(), ReportError> {
        self.flush_all();
        self.manifest
            .end(RunStatus::Failed, ended_at_ns, Some(error.to_string()));
        let manifest_result = write_manifest(&self.dir, &self.manifest);
        self.remember(manifest_result);
        self.first_error.map_or(Ok(()), Err)
    }

    fn flush_all(&mut self) {
        let results = [
            (TIMESERIES_FILE, self.timeseries.flush()),
            (PUBLISH_HLOG_FILE, self.publish_log.flush()),
            (E2E_HLOG_FILE, self.e2e_log.flush()),
        ];
        for (name, result) in results {
            self.remember_io(name, result);
        }
    }

    fn remember(&mut self, result: Result<(), ReportError>) {
        if let Err(error) = result {
            self.first_error.get_or_insert(error);
        }
    }

    fn remember_io(&mut self, file_name: &str, result: io::Result<()>) {
        let path = self.dir.join(file_name);
        self.remember(result.map_err(|e| ReportError::write(path, e)));
    }
}

impl RunObserver for ResultsFolder {
    fn interval(&mut self, row: &IntervalRow) {
        // Each file is flushed per row so that a crash loses at most the second being written.
        let faults = self.faults.as_ref().map_or(String::new(), |marks| {
            marks.during(row.start_ns, row.start_ns + 1_000_000_000)
        });
        let timeseries = self
            .timeseries
            .write_marked_row(row, &faults)
            .and_then(|()| self.timeseries.flush());
        let publish = self
            .publish_log
            .write_interval(row.start_ns, &row.publish)
            .and_then(|()| self.publish_log.flush());
        let e2e = self
            .e2e_log
            .write_interval(row.start_ns, &row.end_to_end)
            .and_then(|()| self.e2e_log.flush());
        self.remember_io(TIMESERIES_FILE, timeseries);
        self.remember_io(PUBLISH_HLOG_FILE, publish);
        self.remember_io(E2E_HLOG_FILE, e2e);
    }
}

/// Creates `dir` unless it exists; an existing folder must be empty so that results of two
/// runs never mix.
fn prepare_empty_folder(dir: &Path) -> Result<(), ReportError> {
    let create_error = |source| ReportError::CreateFolder {
        path: dir.to_path_buf(),
        source,
    };
    match fs::metadata(dir) {
        Ok(metadata) if !metadata.is_dir() => Err(ReportError::NotAFolder {
            path: dir.to_path_buf(),
        }),
        Ok(_) => {
            let mut entries = fs::read_dir(dir).map_err(create_error)?;
            if entries.next().is_some() {
                Err(ReportError::FolderNotEmpty {
                    path: dir.to_path_buf(),
                })
            } else {
                Ok(())
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(create_error)
        }
        Err(error) => Err(create_error(error)),
    }
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), ReportError> {
    let path = dir.join(MANIFEST_FILE);
    let mut bytes =
        serde_json::to_vec_pretty(manifest).map_err(|e| ReportError::write(&path, e.into()))?;
    bytes.push(b'\n');
    write_atomically(&path, &bytes)
}

/// Writes a temporary file next to `path`, syncs it and renames it over `path`, so readers
/// (and a crash) see either the old or the new contents, never half a file.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.tmp"));
    let result = (|| {
        let mut file = File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&temporary);
        ReportError::write(path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::SUMMARY_FILE;
    use crate::test_support::{row, summary};

    #[cfg(target_os = "linux")]
    #[test]
    fn write_errors_while_observing_are_returned_by_finish() {
        let dir = tempfile::tempdir().unwrap();
        let folder_path = dir.path().join("run");
        let mut folder =
            ResultsFolder::create(&folder_path, Manifest::new("0.1.0", "r1", 0)).unwrap();
        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        folder.timeseries = TimeseriesWriter::new(BufWriter::new(full)).unwrap();

        folder.interval(&row(0, 0));
        folder.interval(&row(1, 1_000_000_000));
        let error = folder.finish(&summary(), 2_000_000_000).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("timeseries.csv"), "{message}");

        // The other files are still complete.
        assert!(folder_path.join(SUMMARY_FILE).exists());
        let manifest: Manifest =
            serde_json::from_slice(&fs::read(folder_path.join(MANIFEST_FILE)).unwrap()).unwrap();
        assert_eq!(manifest.status, RunStatus::Complete);
        let publish = fs::read_to_string(folder_path.join(PUBLISH_HLOG_FILE)).unwrap();
        assert_eq!(
            publish
                .lines()
                .filter(|l| !l.starts_with(['#', '"']))
                .count(),
            2
        );
    }
}
