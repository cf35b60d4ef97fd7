//! The `brokerbench` binary: parse the command line, run, print the error chain, exit.

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: brokerbench::allocations::CountingAllocator =
    brokerbench::allocations::CountingAllocator;

fn main() -> ExitCode {
    let cli = brokerbench::cli::Cli::parse();
    if !matches!(
        cli.command,
        brokerbench::cli::Command::Run(_) | brokerbench::cli::Command::Study(_)
    ) {
        // A command whose output is read through a pipe (`broker status | head -1`) ends
        // quietly when the reader is gone, as Unix tools do, instead of panicking on the write.
        // A run or study keeps going: its results are in files, and its clients must not be
        // stopped by a closed pipe.
        // SAFETY: signal(2) with SIG_DFL, before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match brokerbench::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", brokerbench::error_text(error.as_ref()));
            ExitCode::from(brokerbench::exit_code_for(&error))
        }
    }
}
