//! `brokerbench run --set rate=find`: a search for the highest sustainable rate is many runs,
//! so it is a study. Instead of "'find' is not a rate", the run says so and prints the study
//! file that runs the same search, with the command that runs it.

use brokerbench_model::redact::redact_assignment;
use brokerbench_study::plan::is_rate_find;

use crate::cli::RunArgs;
use crate::BadInput;

/// The name the study file is saved as, and its `name:` (which names the study's folder).
const STUDY_NAME: &str = "find-rate";

/// The refusal of `--set rate=find` on `run`, with the study that searches instead; None when
/// the run does not ask for the search.
pub fn rate_find_is_a_study(args: &RunArgs) -> Option<BadInput> {
    if !args.overrides.iter().any(|s| is_rate_find(s)) {
        return None;
    }
    let lines = study_lines(args);
    let mut command = format!("brokerbench study {STUDY_NAME}.yaml");
    for assignment in args.overrides.iter().filter(|s| !is_rate_find(s)) {
        command.push_str(" --set ");
        command.push_str(&shell_word(&redact_assignment(assignment)));
    }
    Some(BadInput(format!(
        "--set rate=find: a search for the highest sustainable rate measures one rate after another, each a run of its own, so it is a study, not one run. Save these {} lines as {STUDY_NAME}.yaml in this folder:\n\n{}\n\nand run: {command}\n(the search's start rate, precision, step length and latency objectives go under `find:` in that file; see the section on `rate: find` in docs/src/studies.md)",
        lines.len(),
        lines.iter().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n"),
    )))
}

/// The study file: its name, the run's workload and driver files (relative to this folder,
/// as the study resolves them relative to its own), and the search.
fn study_lines(args: &RunArgs) -> Vec<String> {
    let mut lines = vec![format!("name: {STUDY_NAME}")];
    for (key, path) in [("workload", &args.workload), ("driver", &args.driver)] {
        if let Some(path) = path {
            lines.push(format!(
                "{key}: {}",
                yaml_scalar(&path.display().to_string())
            ));
        }
    }
    lines.push("set: {rate: find}".into());
    lines
}

/// `text` as a YAML scalar that reads back as the same string.
fn yaml_scalar(text: &str) -> String {
    let plain = brokerbench_model::yaml::from_str::<brokerbench_model::yaml::Value>(text)
        .is_ok_and(|v| v.as_str() == Some(text));
    if plain {
        text.to_string()
    } else {
        serde_json::to_string(text).unwrap_or_default()
    }
}

/// `word` quoted for a POSIX shell when it holds anything but safe characters.
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-.,:/=@%+".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
