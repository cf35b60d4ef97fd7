//! `brokerbench completions SHELL`: a shell's completion script, generated from the command
//! line's definition so that it cannot drift from it.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::Cli;

/// Prints the completion script for `shell` on standard output.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "brokerbench", &mut script);
    print_bytes(&script)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to standard output; a reader that stops early (`| head`) is no error.
pub fn print_bytes(bytes: &[u8]) -> std::io::Result<()> {
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
