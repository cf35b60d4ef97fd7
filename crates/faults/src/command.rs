//! A `command` fault's commands: run by `sh -c`, their output appended to the fault's file in
//! the results folder, bounded in time.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a fault's command may run before it is killed.
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

/// Runs `script` with `sh -c`, its output appended to `log` under a header naming `what`;
/// an error says how it failed (the run goes on: a failing command is a note).
pub(crate) fn run(script: &str, what: &str, log: &Path) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let _ = writeln!(file, "--- {what}: {script}");
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{what} `{script}` could not start: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("{what} `{script}` failed: {status}")),
            Ok(None) if start.elapsed() > COMMAND_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what} `{script}` was still running after {} s and was killed",
                    COMMAND_LIMIT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{what} `{script}`: {e}")),
        }
    }
}
