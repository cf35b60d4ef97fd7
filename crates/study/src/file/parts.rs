//! The parts of a checked study file (its inputs, axes, order, pause between runs, failure
//! handling) and the error that names the study file and the key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brokerbench_model::yaml::Value;

/// What is wrong with a study, named by file and key.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("cannot read study file {file}: {message}")]
    Read { file: String, message: String },
    #[error("{file}: {field}: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
}

impl StudyError {
    pub(super) fn field(
        study: &Path,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        StudyError::Field {
            file: study.display().to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Where a study takes its workload or driver from.
#[derive(Debug, Clone, PartialEq)]
pub enum StudyInput {
    /// The built-in default (quickstart workload, managed Kafka driver).
    Default,
    /// A file, resolved relative to the study file.
    File(PathBuf),
    /// A mapping written in the study file itself.
    Inline(Value),
}

/// One dimension of the grid: one path, or several zipped paths that vary together.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The `--set` paths this axis sets (`driver` and `workload` take file names).
    pub paths: Vec<String>,
    /// The points of the axis, each with one value per path.
    pub points: Vec<Vec<Value>>,
}

impl Axis {
    /// The axis's name as a column: its paths joined with `+`.
    pub fn name(&self) -> String {
        self.paths.join("+")
    }
}

/// In which order the runs of a study go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Repetition 1 of every cell, then repetition 2, ...: slow drift spreads over all cells.
    Interleaved,
    /// All repetitions of a cell, then the next cell.
    Sequential,
    /// A random order, fixed by the study's `seed`.
    Shuffled,
}

/// What happens to the managed broker between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerBetween {
    Keep,
    Restart,
}

/// Pause and broker handling between two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct BetweenRuns {
    pub cooldown: Duration,
    pub broker: BrokerBetween,
}

/// Whether a failed run stops the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    Continue,
    Stop,
}
