//! `brokerbench report DIR … [-o FILE]`: report.html for a run folder, a study folder, or a
//! comparison of several run folders.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use brokerbench_report::html::{comparison_report, folder_report, REPORT_FILE};

use crate::BadInput;

pub fn report(
    folders: &[PathBuf],
    out: Option<&Path>,
    labels: &[String],
) -> anyhow::Result<ExitCode> {
    if folders.len() == 1 && !labels.is_empty() {
        return Err(BadInput(
            "--label names the runs of a comparison; give it with two or more run folders, once per folder".into(),
        )
        .into());
    }
    brokerbench_report::check_given_labels(labels, folders.len())
        .map_err(|e| BadInput(e.to_string()))?;
    for f in folders {
        if !f.is_dir() {
            return Err(BadInput(format!(
                "{}: not a folder; give a run or study folder",
                f.display()
            ))
            .into());
        }
    }
    let (html, default) = match folders {
        [one] => (
            folder_report(one).map_err(|e| BadInput(e.to_string()))?,
            one.join(REPORT_FILE),
        ),
        many => {
            if let Some(study) = many.iter().find(|f| f.join("study.json").exists()) {
                return Err(BadInput(format!(
                    "{}: a study folder cannot be compared as a run; compare its cells with `brokerbench compare {}#N …`, or give one study folder alone",
                    study.display(),
                    study.display()
                ))
                .into());
            }
            (
                comparison_report(many, labels).map_err(|e| BadInput(e.to_string()))?,
                PathBuf::from("comparison.html"),
            )
        }
    };
    let path = out.map(Path::to_path_buf).unwrap_or(default);
    std::fs::write(&path, html).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
