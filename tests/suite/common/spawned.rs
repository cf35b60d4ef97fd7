//! A run in the background, watched through the rows it writes, stopped when a condition
//! holds: for tests that wait for what a broker does instead of giving it a fixed window.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use brokerbench_report::{TIMESERIES_COLUMNS, TIMESERIES_FILE};

use super::{finish_parts, results_folder, Run, WakeupLateness};

/// A `brokerbench run` in the background.
pub struct Spawned {
    child: Child,
    folder: PathBuf,
    dir: tempfile::TempDir,
    lateness: WakeupLateness,
}

/// One row of timeseries.csv, by column name.
pub struct Row(Vec<String>);

impl Row {
    /// The cell of `column` (empty when blank).
    pub fn get(&self, column: &str) -> &str {
        let at = TIMESERIES_COLUMNS
            .iter()
            .position(|&c| c == column)
            .unwrap_or_else(|| panic!("timeseries.csv has no column {column}"));
        self.0.get(at).map_or("", String::as_str)
    }

    /// The cell of `column` as a count (0 when blank).
    pub fn count(&self, column: &str) -> u64 {
        self.get(column).parse().unwrap_or(0)
    }
}

/// The rows written so far to the timeseries.csv of `folder` (none before it exists).
pub fn rows(folder: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(folder.join(TIMESERIES_FILE)).unwrap_or_default();
    // The last line may be half written.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .skip(1)
        .map(|line| Row(line.split(',').map(str::to_string).collect()))
        .collect()
}

impl Spawned {
    /// Starts `brokerbench run --quiet` with `--set` for each of `sets`, then `args`, its
    /// results in a folder of its own.
    pub fn run(sets: &[&str], args: &[&str]) -> Spawned {
        Spawned::run_with_env(sets, args, &[])
    }

    /// [`Spawned::run`] with environment variables set for the run.
    pub fn run_with_env(sets: &[&str], args: &[&str], env: &[(&str, &str)]) -> Spawned {
        let dir = tempfile::tempdir().unwrap();
        let folder = results_folder(dir.path());
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("brokerbench"));
        command.envs(env.iter().copied()).args(["run", "--quiet"]);
        for set in sets {
            command.args(["--set", set]);
        }
        let lateness = WakeupLateness::start();
        let child = command
            .args(args)
            .arg("--out")
            .arg(&folder)
            .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("starting brokerbench run");
        Spawned {
            child,
            folder,
            dir,
            lateness,
        }
    }

    /// Polls the run's rows until `done` holds of them (true), the run ends or `deadline`
    /// passes (false).
    pub fn wait_for_rows(&mut self, deadline: Duration, done: impl Fn(&[Row]) -> bool) -> bool {
        let until = Instant::now() + deadline;
        while Instant::now() < until {
            if done(&rows(&self.folder)) {
                return true;
            }
            if self.child.try_wait().unwrap().is_some() {
                return done(&rows(&self.folder));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Sends the run `signal` (SIGINT is Ctrl-C: it drains, then writes everything).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the child this test started.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Ctrl-C, and the run as it ended.
    pub fn interrupt(self) -> Run {
        self.signal(libc::SIGINT);
        self.wait()
    }

    /// Waits for the run to end by itself (killing it after 10 minutes, so that a hung run
    /// fails its test instead of holding the suite).
    pub fn wait(mut self) -> Run {
        let until = Instant::now() + Duration::from_secs(600);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        let read =
            |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let (stdout, stderr) = (read("stdout"), read("stderr"));
        finish_parts(
            status.code().unwrap_or(-1),
            stdout,
            stderr,
            self.dir,
            self.folder,
            self.lateness.seen(),
        )
    }
}
