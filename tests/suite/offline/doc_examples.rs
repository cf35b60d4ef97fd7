//! The documentation's examples, run. In README.md, CONTRIBUTING.md and the book under docs/:
//! every `brokerbench …` line of a code block is parsed by the command line (and the cheap ones,
//! `validate` and `study --dry-run` of files in the repository, are run); every YAML example is
//! read by the loader `brokerbench validate` and `brokerbench study` use; each family's page
//! lists every field of its driver files with the defaults the code has, the workload page every
//! workload field with its default; and mdBook builds the book without a warning.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::brokerbench;
use brokerbench::cli::Cli;
use brokerbench::families::REGISTRY;
use clap::Parser;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CONTRIBUTING.md and the book's pages.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    let pages = fs::read_dir(root().join("docs/src")).expect("docs/src");
    files.extend(pages.map(|e| e.expect("an entry").path()));
    files.retain(|p| p.extension().is_some_and(|e| e == "md"));
    files.sort();
    files
}

/// A document's text and its path as the repository shows it.
fn read(file: &Path) -> (String, String) {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let shown = file
        .strip_prefix(root())
        .unwrap_or(file)
        .display()
        .to_string();
    (text, shown)
}

/// A fenced code block: where it starts, its language (the info string's first word) and text.
struct Block {
    place: String,
    lang: String,
    body: String,
}

fn blocks_of(file: &Path) -> Vec<Block> {
    let (text, shown) = read(file);
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                let info = line.trim_start().trim_start_matches('`');
                open = Some(Block {
                    place: format!("{shown}:{}", i + 1),
                    lang: info.split([' ', ',']).next().unwrap_or("").to_string(),
                    body: String::new(),
                });
            }
            (Some(_), true) => blocks.extend(open.take()),
            (Some(block), false) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, false) => {}
        }
    }
    blocks
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|f| blocks_of(f)).collect()
}

/// The `brokerbench …` command lines of a block (a `$ ` prompt dropped, `\` continuations
/// joined), split as a shell would, comments dropped.
fn command_lines(block: &Block) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in block.body.lines() {
        let line = line.trim_start().trim_start_matches("$ ");
        if pending.is_empty() && !line.starts_with("brokerbench ") && line != "brokerbench" {
            continue;
        }
        pending.push_str(line.trim_end_matches('\\'));
        pending.push(' ');
        if !line.ends_with('\\') {
            let words = shlex::split(&pending)
                .unwrap_or_else(|| panic!("{}: unbalanced quotes in {pending}", block.place));
            commands.extend(brokerbench_commands(words));
            pending.clear();
        }
    }
    commands
}

/// The brokerbench commands of a shell line: split at `&&`, `||`, `|`, `;` and `&`, with
/// redirections (`> file`, `2>/dev/null`) left out.
fn brokerbench_commands(words: Vec<String>) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "&&" | "||" | "|" | ";" | "&" => commands.push(Vec::new()),
            ">" | ">>" | "<" | "2>" | "2>>" => {
                words.next();
            }
            w if w.starts_with(['>', '<']) || w.starts_with("2>") => {}
            _ => commands
                .last_mut()
                .expect("one command at least")
                .push(word),
        }
    }
    commands.retain(|c| c.first().is_some_and(|w| w == "brokerbench"));
    commands
}

#[test]
fn every_command_line_in_the_docs_parses() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for block in all_blocks() {
        for words in command_lines(&block) {
            checked += 1;
            if let Err(e) = Cli::try_parse_from(&words) {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                wrong.push(format!("{}: `{}`: {first}", block.place, words.join(" ")));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} command lines found: is the reader broken?"
    );
    assert!(
        wrong.is_empty(),
        "command lines the CLI refuses:\n{}",
        wrong.join("\n")
    );
}

/// Whether every file a command line names (a word ending in .yaml) is in the repository.
fn names_repository_files(words: &[String]) -> bool {
    let files: Vec<&String> = words.iter().filter(|w| w.ends_with(".yaml")).collect();
    !files.is_empty() && files.iter().all(|w| root().join(w).is_file())
}

#[test]
fn the_docs_validate_and_dry_run_commands_succeed() {
    let mut ran = 0;
    for block in all_blocks() {
        for words in command_lines(&block) {
            let cheap = matches!(words.get(1).map(String::as_str), Some("validate"))
                || (words.get(1).map(String::as_str) == Some("study")
                    && words.iter().any(|w| w == "--dry-run"));
            if !cheap || !names_repository_files(&words) {
                continue;
            }
            ran += 1;
            let output = brokerbench()
                .current_dir(root())
                .args(&words[1..])
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{}: `{}` failed: {}",
                block.place,
                words.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    assert!(
        ran >= 2,
        "only {ran} validate or dry-run commands found in the docs"
    );
}

/// The `brokerbench …` spans of inline code outside code blocks (a span may run over a line
/// break), with their places; not those that name a command (`brokerbench broker up`) rather
/// than show one, nor those with a placeholder (`FILE`, `N`, `KEY=VALUE`, `…`) for a value.
fn inline_commands(file: &Path) -> Vec<(String, Vec<String>)> {
    let (text, shown) = read(file);
    let prose = without_code_blocks(&text);
    let mut commands = Vec::new();
    let mut offset = 0;
    for (k, piece) in prose.split('`').enumerate() {
        let span = piece.replace('\n', " ");
        if k % 2 == 1 && span.starts_with("brokerbench ") && !names_or_placeholds(&span) {
            let line = prose[..offset].matches('\n').count() + 1;
            let words = shlex::split(&span).unwrap_or_default();
            let place = format!("{shown}:{line}");
            commands.extend(
                brokerbench_commands(words)
                    .into_iter()
                    .map(|c| (place.clone(), c)),
            );
        }
        offset += piece.len() + 1;
    }
    commands
}

/// The text with the lines of fenced code blocks emptied (line numbers kept).
fn without_code_blocks(text: &str) -> String {
    let mut in_block = false;
    let mut out = String::new();
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        in_block ^= fence;
        if !in_block && !fence {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Whether an inline `brokerbench …` only names a command (every word a command's name), or
/// holds a placeholder instead of a value (alternatives such as `up|down` too).
fn names_or_placeholds(span: &str) -> bool {
    const NAMES: [&str; 17] = [
        "run",
        "study",
        "compare",
        "report",
        "merge",
        "k8s",
        "render",
        "validate",
        "broker",
        "install",
        "up",
        "down",
        "status",
        "data",
        "generate",
        "completions",
        "man",
    ];
    let words: Vec<&str> = span.split_whitespace().skip(1).collect();
    let names = words.iter().all(|w| NAMES.contains(w));
    let placeholder = span.contains(['…', '<', '[', '|']) || span.contains("...");
    let shouted = span
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
    names || placeholder || shouted
}

#[test]
fn every_command_in_the_docs_prose_parses() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in documents() {
        for (place, words) in inline_commands(&file) {
            checked += 1;
            if let Err(e) = Cli::try_parse_from(&words) {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                wrong.push(format!("{place}: `{}`: {first}", words.join(" ")));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} commands found in prose: is the reader broken?"
    );
    assert!(
        wrong.is_empty(),
        "commands the CLI refuses:\n{}",
        wrong.join("\n")
    );
}

/// What a YAML example is, from its top-level keys: a driver file (`driver:` a family's name),
/// a study file (or a part of one), or a workload file.
#[derive(Debug, PartialEq)]
enum Kind {
    Driver,
    Study,
    Workload,
}

fn kind_of(map: &serde_json::Map<String, serde_json::Value>) -> Kind {
    const STUDY_KEYS: [&str; 8] = [
        "axes",
        "set",
        "find",
        "workload",
        "repetitions",
        "order",
        "between_runs",
        "on_failure",
    ];
    let family = map.get("driver").and_then(|d| d.as_str());
    if STUDY_KEYS.iter().any(|k| map.contains_key(*k)) || map.contains_key("broker") {
        Kind::Study
    } else if family.is_some_and(|name| REGISTRY.names().contains(&name)) {
        Kind::Driver
    } else {
        Kind::Workload
    }
}

/// Checks one YAML example as its kind: a workload or driver file with the loader of
/// `brokerbench validate`; a study (a name added when it has none) with `study --dry-run` from a
/// folder beside a link to the repository's workloads/, as if it were in studies/.
fn check_yaml(block: &Block, dir: &Path) -> Result<(), String> {
    let mut map: serde_json::Map<String, serde_json::Value> =
        brokerbench_model::yaml::from_str(&block.body).map_err(|e| e.to_string())?;
    let kind = kind_of(&map);
    let studies = dir.join("studies");
    fs::create_dir_all(&studies).unwrap();
    let file = studies.join("example.yaml");
    if kind == Kind::Study && !map.contains_key("name") {
        map.insert("name".into(), "docs-example".into());
    }
    fs::write(&file, brokerbench_model::yaml::to_string(&map).unwrap()).unwrap();
    put_named_files(&serde_json::Value::Object(map), &studies);
    if kind != Kind::Study {
        let schemas = REGISTRY.schemas();
        return brokerbench_model::spec::validate_file(&schemas, &file)
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    let output = brokerbench()
        .arg("study")
        .arg(&file)
        .arg("--dry-run")
        .output()
        .unwrap();
    match output.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&output.stderr).into_owned()),
    }
}

/// The files an example names in a `*_file` field (`ca_file: ca.pem`) are the reader's own:
/// empty ones are put in place, relative to the example, so that the loader can check the rest.
fn put_named_files(value: &serde_json::Value, dir: &Path) {
    let serde_json::Value::Object(map) = value else {
        return;
    };
    for (key, inner) in map {
        match inner.as_str() {
            Some(name) if key.ends_with("_file") && !name.starts_with('/') => {
                fs::write(dir.join(name), "").unwrap()
            }
            _ => put_named_files(inner, dir),
        }
    }
}

#[test]
fn every_yaml_example_in_the_docs_is_read_by_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root().join("workloads"), dir.path().join("workloads")).unwrap();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for block in all_blocks().into_iter().filter(|b| b.lang == "yaml") {
        checked += 1;
        if let Err(why) = check_yaml(&block, dir.path()) {
            wrong.push(format!("{}: {why}", block.place));
        }
    }
    assert!(
        checked >= 9,
        "only {checked} YAML examples found: is the reader broken?"
    );
    assert!(
        wrong.is_empty(),
        "YAML examples the loader refuses:\n{}",
        wrong.join("\n")
    );
}

/// The top-level keys a YAML example names, a commented-out `# key:` line included.
fn named_keys(body: &str) -> Vec<String> {
    body.lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.trim_start_matches(['#', ' ']))
        .filter_map(|l| l.split_once(':').map(|(key, _)| key.to_string()))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

/// The reference listing of a page: its YAML example naming the most top-level keys.
fn listing(page: &str, wanted: impl Fn(&Block) -> bool) -> Block {
    blocks_of(&root().join("docs/src").join(page))
        .into_iter()
        .filter(|b| b.lang == "yaml" && wanted(b))
        .max_by_key(|b| named_keys(&b.body).len())
        .unwrap_or_else(|| panic!("docs/src/{page} has no reference listing"))
}

fn written(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, body).unwrap();
    path
}

/// Fields of `listing` whose value differs from the built-in's (null there: no default).
fn differing(
    listing: &serde_json::Value,
    builtin: &serde_json::Value,
    keys: &[String],
) -> Vec<String> {
    keys.iter()
        .filter(|k| listing.get(k.as_str()).is_some())
        .filter(|k| {
            !builtin
                .get(k.as_str())
                .is_none_or(serde_json::Value::is_null)
        })
        .filter(|k| listing.get(k.as_str()) != builtin.get(k.as_str()))
        .map(|k| {
            format!(
                "{k}: the page says {}, the code {}",
                listing[k.as_str()],
                builtin[k.as_str()]
            )
        })
        .collect()
}

#[test]
fn each_family_page_lists_every_driver_field_with_the_codes_defaults() {
    let schemas = REGISTRY.schemas();
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for family in &schemas {
        let name = family.name();
        let page = format!("{name}.md");
        let block = listing(&page, |b| b.body.starts_with(&format!("driver: {name}\n")));
        let keys = named_keys(&block.body);
        for field in family
            .fields()
            .iter()
            .filter(|f| !["driver", "broker_metrics"].contains(f))
        {
            if !keys.iter().any(|k| k == field) {
                wrong.push(format!(
                    "{}: no `{field}` (a field of {name} driver files)",
                    block.place
                ));
            }
        }
        let file = written(dir.path(), &format!("{name}.yaml"), &block.body);
        let page_specs = brokerbench_model::load_specs(&schemas, None, Some(&file), &[]).unwrap();
        let builtin =
            brokerbench_model::load_specs(&schemas, None, None, &[format!("driver={name}")])
                .unwrap();
        let diffs = differing(
            &page_specs.driver.redacted(),
            &builtin.driver.redacted(),
            &keys,
        );
        wrong.extend(diffs.into_iter().map(|d| format!("{}: {d}", block.place)));
    }
    let metrics = listing("monitoring.md", |b| b.body.contains("broker_metrics:"));
    assert!(named_keys(&metrics.body).contains(&"broker_metrics".to_string()));
    assert!(
        wrong.is_empty(),
        "driver reference listings out of step with the code:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_workload_page_lists_every_workload_field_with_the_quickstarts_values() {
    let block = listing("workload.md", |b| b.body.contains("\ntopics:"));
    let keys = named_keys(&block.body);
    let missing: Vec<_> = brokerbench_model::WORKLOAD_FIELDS
        .iter()
        .filter(|f| !keys.iter().any(|k| k == *f))
        .collect();
    assert!(missing.is_empty(), "{}: no {missing:?}", block.place);
    let dir = tempfile::tempdir().unwrap();
    let file = written(dir.path(), "workload.yaml", &block.body);
    let schemas = REGISTRY.schemas();
    let page = brokerbench_model::load_specs(&schemas, Some(&file), None, &[]).unwrap();
    let builtin = brokerbench_model::load_specs(&schemas, None, None, &[]).unwrap();
    assert_eq!(
        page.workload, builtin.workload,
        "{}: the listing is not the built-in quickstart",
        block.place
    );
}

#[test]
fn the_book_builds_without_a_warning() {
    let out = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("mdbook")
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .expect("mdbook is on PATH (scripts/setup installs it from crates.io)");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "mdbook build failed:\n{log}");
    let complaints: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        complaints.is_empty(),
        "mdbook complained:\n{}",
        complaints.join("\n")
    );
    for page in documents()
        .iter()
        .filter(|p| p.starts_with(root().join("docs/src")))
    {
        let name = page
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .replace("SUMMARY", "index");
        let html = out.path().join(format!("{name}.html"));
        assert!(html.is_file(), "the book has no {}", html.display());
    }
}
