//! `brokerbench man`: the man pages, generated from the command line's definition. Each page
//! is clap_mangen's sections with the help's examples as an EXAMPLES section of its own (each
//! command line in bold, what it does beneath it) instead of a reflowed EXTRA paragraph.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;

use crate::cli::Cli;

/// Prints brokerbench.1, or writes it and a page per command (brokerbench-run.1, …) into `out`.
pub fn man(out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    match out {
        None => {
            let mut roff = Vec::new();
            page(&command, &mut roff)?;
            super::completions::print_bytes(&roff).context("writing the man page")?;
        }
        Some(folder) => {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("creating {}", folder.display()))?;
            let written = write_pages(&command, folder)
                .with_context(|| format!("writing the man pages into {}", folder.display()))?;
            println!("{written} man pages written into {}", folder.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `command` and of each of its commands, below it first; returns how many.
fn write_pages(command: &clap::Command, folder: &Path) -> std::io::Result<usize> {
    let mut written = 0;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += write_pages(sub, folder)?;
    }
    let name = command.get_display_name().unwrap_or(command.get_name());
    let mut file = std::fs::File::create(folder.join(format!("{name}.1")))?;
    page(command, &mut file)?;
    file.flush()?;
    Ok(written + 1)
}

/// One page: title, name, synopsis, description, options, commands, examples, version.
fn page(command: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = Man::new(command.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    if command.has_subcommands() {
        man.render_subcommands_section(w)?;
    }
    if let Some(help) = command.get_after_long_help() {
        examples(&help.to_string()).to_writer(w)?;
    }
    man.render_version_section(w)
}

/// The EXAMPLES section from a long help's examples: a line `  brokerbench …` is a tagged
/// paragraph, the lines indented under it its text; any other line a paragraph of its own.
fn examples(help: &str) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXAMPLES"]);
    roff.control("nh", []);
    for line in help
        .lines()
        .filter(|l| !l.trim().is_empty() && *l != "Examples:")
    {
        if let Some(command) = line.strip_prefix("  ").filter(|l| !l.starts_with(' ')) {
            roff.control("TP", []);
            roff.text([bold(command)]);
        } else if line.starts_with("      ") {
            roff.text([roman(line.trim())]);
        } else {
            roff.control("PP", []);
            roff.text([roman(line)]);
        }
    }
    roff
}
