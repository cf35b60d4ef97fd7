//! The documentation's links: every relative link in README.md, CONTRIBUTING.md and the book
//! under docs/ must name a file that exists and, with `#anchor`, a heading of that slug; and
//! every page of the book must be listed in docs/src/SUMMARY.md, or mdBook would not build it.
//! Plain Rust, no Markdown library: fenced code and inline code are blanked out first, so a
//! `[x](y)` shown as code is not taken for a link.

use std::collections::HashSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CONTRIBUTING.md and every .md file under docs/, sorted.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    markdown_under(&root().join("docs"), &mut files);
    files.sort();
    files
}

fn markdown_under(dir: &Path, into: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            markdown_under(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The text with fenced code blocks and inline code spans replaced by spaces (newlines kept,
/// so byte offsets still give the right line).
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        let opens = marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char);
        match &fence {
            Some(open) if opens && marker.starts_with(open.as_str()) => fence = None,
            Some(_) => {}
            None if opens => fence = Some(marker.clone()),
            None => {
                out.push_str(line);
                continue;
            }
        }
        out.push_str(&blank(line));
    }
    blank_inline_code(&out)
}

fn blank(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

/// Blanks each inline code span: a run of n backticks up to the next run of exactly n.
fn blank_inline_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|c| **c == '`').count();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let close = loop {
            match chars[j..].iter().position(|c| *c == '`') {
                None => break None,
                Some(k) => {
                    let m = run_at(j + k);
                    if m == n {
                        break Some(j + k);
                    }
                    j += k + m;
                }
            }
        };
        let end = close.map_or(i + n, |c| c + n);
        out.push_str(&blank(&chars[i..end].iter().collect::<String>()));
        i = end;
    }
    out
}

/// Each link target in the text with its line number: inline links `[text](target "title")`
/// (images too) and reference definitions `[name]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let text = prose(text);
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let target: String = rest
            .trim_start_matches('<')
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != ')' && *c != '>')
            .collect();
        found.push((line_of(at), target));
    }
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let (true, Some(end)) = (trimmed.starts_with('['), trimmed.find("]:")) {
            if let Some(target) = trimmed[end + 2..].split_whitespace().next() {
                found.push((line_of(offset), target.to_string()));
            }
        }
        offset += line.len();
    }
    found
}

/// The anchor GitHub and mdBook give a heading: lower case, letters, digits, `-` and `_` kept,
/// spaces to `-`, everything else dropped (inline code keeps its text, a link its words).
fn slug(heading: &str) -> String {
    let mut words = String::new();
    let mut in_target = false;
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ']' if chars.peek() == Some(&'(') => in_target = true,
            ')' if in_target => in_target = false,
            _ if in_target => {}
            _ => words.push(c),
        }
    }
    words
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next()?),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors of every ATX heading outside code; a repeated slug gets `-1`, `-2`, ….
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in strip_fences(text).lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut candidate = base.clone();
        let mut n = 0;
        while !seen.insert(candidate.clone()) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
    }
    seen
}

/// Fenced code blanked, inline code kept (a heading's code is part of its slug).
fn strip_fences(text: &str) -> String {
    let mut out = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            out.push('\n');
            continue;
        }
        if !in_fence {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// What is wrong with one relative link of `from`, if anything.
fn check_link(from: &Path, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        normalize(&from.parent().expect("a file's folder").join(path))
    };
    if !file.exists() {
        return Some(format!("{} does not exist", shown(&file)));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "#{anchor} points into {}, not a Markdown page",
            shown(&file)
        ));
    }
    let known = anchors(&read(&file));
    (!known.contains(anchor)).then(|| {
        let mut names: Vec<_> = known.into_iter().collect();
        names.sort();
        format!(
            "{} has no heading #{anchor} (it has: {})",
            shown(&file),
            names.join(", ")
        )
    })
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents() {
        for (line, target) in links(&read(&file)) {
            if is_external(&target) {
                continue;
            }
            checked += 1;
            if let Some(why) = check_link(&file, &target) {
                broken.push(format!("{}:{line}: ({target}) {why}", shown(&file)));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} relative links found: is the link reader broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The repository paths a text names in inline code (`crates/…`, `scripts/…`, `workloads/…`,
/// `studies/…`, `bench/…`, `docs/…`), with their line numbers: the paths a reader would open.
fn named_paths(text: &str) -> Vec<(usize, String)> {
    const ROOTS: [&str; 9] = [
        "crates/",
        "scripts/",
        "workloads/",
        "studies/",
        "bench/",
        "docs/",
        "tests/",
        "src/",
        "deploy/",
    ];
    let mut paths = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for span in line.split('`').skip(1).step_by(2) {
            let path = span.split_whitespace().next().unwrap_or_default();
            let plain = !path.contains(['*', '<', '{', '$', '…']);
            if plain && ROOTS.iter().any(|r| path.starts_with(r)) {
                paths.push((i + 1, path.trim_end_matches([':', ',', '.']).to_string()));
            }
        }
    }
    paths
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let mut stale = Vec::new();
    let mut checked = 0;
    for file in documents() {
        for (line, path) in named_paths(&read(&file)) {
            checked += 1;
            let path = path.split(['#', ':']).next().unwrap_or_default();
            if !root().join(path).exists() {
                stale.push(format!("{}:{line}: {path}", shown(&file)));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} paths found: is the reader broken?"
    );
    assert!(
        stale.is_empty(),
        "paths that do not exist:\n{}",
        stale.join("\n")
    );
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let src = root().join("docs/src");
    let summary = src.join("SUMMARY.md");
    let listed: HashSet<PathBuf> = links(&read(&summary))
        .into_iter()
        .filter(|(_, t)| !is_external(t))
        .map(|(_, t)| normalize(&src.join(t.split('#').next().unwrap_or_default())))
        .collect();
    let mut pages = Vec::new();
    markdown_under(&src, &mut pages);
    let missing: Vec<String> = pages
        .iter()
        .filter(|p| **p != summary && !listed.contains(*p))
        .map(|p| shown(p))
        .collect();
    assert!(
        pages.len() > 10,
        "only {} pages under docs/src",
        pages.len()
    );
    assert!(
        missing.is_empty(),
        "pages not listed in docs/src/SUMMARY.md (mdBook would leave them out): {}",
        missing.join(", ")
    );
    assert!(
        root().join("docs/book.toml").is_file(),
        "docs/book.toml is missing"
    );
}

#[test]
fn links_are_read_from_prose_and_not_from_code() {
    let text = "See [a](a.md#x) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d]: d.md\n![e](e.png)\n\
                [f\nspans](f.md)\n``[g](g.md) ` inside``\n";
    let targets: Vec<(usize, String)> = links(text);
    let expected = [(1, "a.md#x"), (8, "f.md"), (6, "e.png"), (5, "d.md")];
    let mut got: Vec<(usize, &str)> = targets.iter().map(|(l, t)| (*l, t.as_str())).collect();
    got.sort();
    let mut want = expected.to_vec();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn slugs_follow_github_and_mdbook() {
    let text = "# Kafka\n## TLS (amqps://)\n## The maximum sustainable throughput (`rate: find`)\n\
                ## omb-result.json: OMB's result format\n## Kafka\n```\n# not a heading\n```\n\
                ## [Linked](x.md) words\n";
    let mut got: Vec<String> = anchors(text).into_iter().collect();
    got.sort();
    assert_eq!(
        got,
        [
            "kafka",
            "kafka-1",
            "linked-words",
            "omb-resultjson-ombs-result-format",
            "the-maximum-sustainable-throughput-rate-find",
            "tls-amqps",
        ]
    );
}
