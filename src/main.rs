//! The `brokerbench` binary: parse the command line, run, print the error chain, exit.

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: brokerbench::allocations::CountingAllocator =
    brokerbench::allocations::CountingAllocator;

fn main() -> ExitCode {
    let cli = brokerbench::cli::Cli::parse();
    match brokerbench::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", brokerbench::error_text(error.as_ref()));
            ExitCode::from(brokerbench::exit_code_for(&error))
        }
    }
}
