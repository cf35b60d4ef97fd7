//! brokerbench as a library: `run(cli)` carries out one command, so tests can call it
//! in-process; `exit_code_for` maps an error to the documented exit codes.

pub mod allocations;
pub mod cli;
mod commands;
mod dashboard;
pub mod families;
mod monitoring;
pub mod shards;

use std::process::ExitCode;

use brokerbench_driver::DriverError;
use brokerbench_engine::EngineError;
use brokerbench_model::SpecError;

/// Exit codes: 0 clean run; 1 completed with errors or lost messages (or another failure);
/// 2 bad input; 3 broker unreachable or credentials refused; 130 interrupted.
pub mod exit {
    pub const CLEAN: u8 = 0;
    pub const WITH_ERRORS: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const UNREACHABLE: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

/// Error for input problems found outside the spec loader (e.g. a missing data file).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Carries out the command.
pub fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    commands::dispatch(cli)
}

/// An error and its causes on one line, each cause said once: a message that already quotes
/// its cause (`cannot read x: No such file or directory`) is not followed by it again.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

/// The exit code for a failed command, from the kind of error in its chain.
pub fn exit_code_for(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause.is::<SpecError>() || cause.is::<BadInput>() {
            return exit::BAD_INPUT;
        }
        if let Some(e) = cause.downcast_ref::<DriverError>() {
            return match e {
                DriverError::Unreachable { .. } | DriverError::Authentication { .. } => {
                    exit::UNREACHABLE
                }
                DriverError::Unsatisfiable(_) => exit::BAD_INPUT,
                _ => exit::WITH_ERRORS,
            };
        }
        if let Some(e) = cause.downcast_ref::<EngineError>() {
            return match e {
                EngineError::Interrupted => exit::INTERRUPTED,
                EngineError::Payload(_) | EngineError::Driver(DriverError::Unsatisfiable(_)) => {
                    exit::BAD_INPUT
                }
                EngineError::Driver(
                    DriverError::Unreachable { .. } | DriverError::Authentication { .. },
                ) => exit::UNREACHABLE,
                _ => exit::WITH_ERRORS,
            };
        }
    }
    exit::WITH_ERRORS
}

#[cfg(test)]
mod error_text_tests {
    use super::*;

    #[test]
    fn each_cause_is_said_once() {
        let quoted = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let error = anyhow::Error::new(quoted).context("cannot read w.yaml: No such file");
        assert_eq!(
            error_text(error.as_ref()),
            "cannot read w.yaml: No such file"
        );
        let plain = anyhow::anyhow!("refused").context("reaching the broker");
        assert_eq!(error_text(plain.as_ref()), "reaching the broker: refused");
    }
}
