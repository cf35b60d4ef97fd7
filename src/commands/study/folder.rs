//! The study's folder: a new one, or the newest of the same study to resume (refused when
//! its definition changed, with the differences), and the inline inputs written into it.

use super::*;

/// Finds the folder to resume, or makes a new one; checks that a resumed study is unchanged.
pub(super) fn study_folder(
    study: &Study,
    args: &StudyArgs,
    definition: &Json,
) -> anyhow::Result<(PathBuf, Option<StudyState>)> {
    let candidate = match &args.out {
        Some(out) => {
            if args.fresh && out.join(STUDY_FILE).exists() {
                return Err(BadInput(format!(
                    "--fresh: {} already holds a study; choose another --out or leave out --fresh to resume it",
                    out.display()
                ))
                .into());
            }
            Some(out.clone())
        }
        None if args.fresh => None,
        None => newest_study_folder(Path::new("studies"), &study.name),
    };
    if let Some(dir) = candidate.filter(|d| d.join(STUDY_FILE).exists()) {
        let previous: StudyState = serde_json::from_value(read_json(&dir.join(STUDY_FILE))?)
            .with_context(|| format!("reading {}", dir.join(STUDY_FILE).display()))?;
        let mut changed = Vec::new();
        // Folders of earlier versions kept credentials in their definition.
        let before = redacted_definition(&previous.definition);
        diff_paths("", &before, definition, &mut changed);
        if !changed.is_empty() {
            return Err(BadInput(format!(
                "{}: the study changed since {} was started ({}); run it with --fresh to start a new study folder, or restore the file to resume",
                study.file.display(),
                dir.display(),
                changed.join(", ")
            ))
            .into());
        }
        let missing = previous.secrets.missing(variable_is_set);
        if !missing.is_empty() {
            return Err(BadInput(format!(
                "{}: cannot resume, credentials are missing (a study folder never keeps them): {}; supply them and run the study again, or start anew with --fresh",
                dir.display(),
                missing.join("; ")
            ))
            .into());
        }
        return Ok((dir, Some(previous)));
    }
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("studies").join(folder_name(now_ns(), &study.name)));
    fs::create_dir_all(dir.join("runs"))
        .with_context(|| format!("creating the study folder '{}'", dir.display()))?;
    Ok((dir, None))
}

/// The newest folder under `root` made for a study of this name.
pub(super) fn newest_study_folder(root: &Path, name: &str) -> Option<PathBuf> {
    let suffix = folder_name(0, name);
    let suffix = suffix
        .split_once('-')
        .map(|(_, rest)| rest)?
        .split_once('-')?
        .1
        .to_string();
    let mut folders: Vec<PathBuf> = fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.get(16..) == Some(suffix.as_str()))
                && p.join(STUDY_FILE).exists()
        })
        .collect();
    folders.sort();
    folders.pop()
}

/// The paths at which two JSON values differ (objects compared key by key).
pub(super) fn diff_paths(prefix: &str, a: &Json, b: &Json, out: &mut Vec<String>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(va), Some(vb)) => diff_paths(&path, va, vb, out),
                    (None, Some(_)) => out.push(format!("`{path}` added")),
                    (Some(_), None) => out.push(format!("`{path}` removed")),
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!(
            "`{prefix}` was {} and is now {}",
            short_json(a),
            short_json(b)
        )),
        _ => {}
    }
}

pub(super) fn short_json(v: &Json) -> String {
    let text = v.to_string();
    if text.len() > 60 {
        format!(
            "{}…",
            &text[..text.char_indices().nth(57).map_or(text.len(), |(i, _)| i)]
        )
    } else {
        text
    }
}

/// Inline workload or driver maps become files in the study folder, so that every run can be
/// read and repeated by hand. Those files are redacted like everything the study writes: a
/// driver that holds credentials reaches its runs on their standard input instead
/// (`brokerbench run --driver -`), read from the study file by each invocation.
pub(super) struct Inputs {
    pub(super) workload: Option<PathBuf>,
    /// The inline driver as YAML, credentials included: never written to a file.
    pub(super) driver: Option<String>,
}

/// The first lines of an inline input written to the study folder.
pub(super) const INPUT_HEADER: &str = "# Written by brokerbench study from the study file's inline map, credentials replaced\n# by ***. Its runs read an inline driver on standard input (brokerbench run --driver -).\n";

pub(super) fn write_inline_inputs(study: &Study, dir: &Path) -> anyhow::Result<Inputs> {
    // The record of an inline map, and the map as YAML with its credentials.
    let write = |name: &str,
                 input: &brokerbench_study::StudyInput|
     -> anyhow::Result<Option<(PathBuf, String)>> {
        let brokerbench_study::StudyInput::Inline(value) = input else {
            return Ok(None);
        };
        let folder = dir.join("inputs");
        fs::create_dir_all(&folder)?;
        let path = folder.join(name);
        let shown = brokerbench_model::yaml::to_string(&redacted_value("", value))?;
        fs::write(&path, format!("{INPUT_HEADER}{shown}"))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some((path, brokerbench_model::yaml::to_string(value)?)))
    };
    Ok(Inputs {
        // A workload has no credential fields: its record is what the runs read.
        workload: write("workload.yaml", &study.workload)?.map(|(path, _)| path),
        driver: write("driver.yaml", &study.driver)?.map(|(_, text)| text),
    })
}
