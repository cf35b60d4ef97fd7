//! The installed server: where its scripts are, its version, and why a boot failed.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::names::{CTL, DEBIAN_WRAPPER, OTHER_BIN_DIRS, PACKAGE, PACKAGE_BIN_DIR, SERVER};

/// The folder with a usable `rabbitmq-server` and `rabbitmqctl`: Debian's package folder,
/// then PATH, then the sbin folders (often not on a user's PATH).
pub(super) fn find_bin_dir(path: Option<OsString>) -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from(PACKAGE_BIN_DIR)];
    if let Some(path) = path {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates.extend(OTHER_BIN_DIRS.iter().map(PathBuf::from));
    candidates
        .into_iter()
        .find(|dir| is_usable_script(&dir.join(SERVER)) && is_usable_script(&dir.join(CTL)))
}

/// An executable file that is not Debian's `/usr/sbin` wrapper (it re-runs the script as
/// the `rabbitmq` user with the system node's paths, so it cannot start a node of ours).
pub(super) fn is_usable_script(path: &Path) -> bool {
    match fs::canonicalize(path) {
        Ok(real) => {
            real.file_name() != Some(OsStr::new(DEBIAN_WRAPPER))
                && fs::metadata(&real)
                    .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        }
        Err(_) => false,
    }
}

/// `3.10.8` from `…/rabbitmq_server-3.10.8/sbin/rabbitmq-server`, the layout of Debian's
/// package and of RabbitMQ's generic Unix tarball.
pub(super) fn version_from_install(bin_dir: &Path) -> Option<String> {
    let script = fs::canonicalize(bin_dir.join(SERVER)).ok()?;
    let release = script.parent()?.parent()?.file_name()?.to_str()?;
    release
        .strip_prefix("rabbitmq_server-")
        .filter(|version| !version.is_empty())
        .map(str::to_string)
}

pub(super) fn version_from_dpkg() -> Option<String> {
    let output = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", PACKAGE])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    upstream_version(&String::from_utf8_lossy(&output.stdout))
}

/// The upstream part of a Debian version: `3.10.8` from `1:3.10.8-1.1+deb12u1`.
pub(super) fn upstream_version(debian: &str) -> Option<String> {
    let debian = debian.trim();
    let without_epoch = debian.split_once(':').map_or(debian, |(_, rest)| rest);
    let upstream = without_epoch
        .rsplit_once('-')
        .map_or(without_epoch, |(upstream, _)| upstream);
    (!upstream.is_empty()).then(|| upstream.to_string())
}

/// The lines that explain a failed boot. RabbitMQ prints the errors that caused it, then
/// `BOOT FAILED`, then `Error during startup: TERM` (an Erlang term that may span lines),
/// then a blank line and crash reports nobody needs. `None` when the text has no such block.
pub(super) fn boot_failure(text: &str) -> Option<String> {
    const MAX_CAUSE_LINES: usize = 12;
    const MAX_REASON_LINES: usize = 20;
    // In RabbitMQ's own log a blank line still carries a timestamp, level and process id.
    let blank = |line: &str| line.trim().is_empty() || line.trim_end().ends_with('>');
    let lines: Vec<&str> = text.lines().collect();
    let failed = lines
        .iter()
        .position(|line| line.trim_end().ends_with("BOOT FAILED"))?;
    // The causes: the error lines right before it.
    let mut start = failed;
    while start > 0
        && failed - start < MAX_CAUSE_LINES
        && (lines[start - 1].contains("[error]") || blank(lines[start - 1]))
    {
        start -= 1;
    }
    while start < failed && blank(lines[start]) {
        start += 1;
    }
    // The reason, to the end of its term.
    let end = match lines[failed..]
        .iter()
        .position(|line| line.contains("Error during startup"))
    {
        Some(offset) => {
            let reason = failed + offset;
            let after = &lines[reason + 1..];
            let length = after
                .iter()
                .position(|line| blank(line))
                .unwrap_or(after.len());
            reason + 1 + length.min(MAX_REASON_LINES)
        }
        None => failed + 1,
    };
    Some(lines[start..end].join("\n"))
}
