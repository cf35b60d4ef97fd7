//! `brokerbench data generate`: sensor records for replay with `payload: {kind: file}`.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use brokerbench_engine::sensor::SensorRecords;

pub fn generate(records: u64, out: &Path, seed: u64) -> anyhow::Result<ExitCode> {
    let file =
        std::fs::File::create(out).with_context(|| format!("creating '{}'", out.display()))?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    let mut generator = SensorRecords::new(seed);
    let mut line = Vec::with_capacity(256);
    let mut bytes = 0u64;
    for _ in 0..records {
        line.clear();
        generator.write_next(&mut line);
        line.push(b'\n');
        bytes += line.len() as u64;
        writer
            .write_all(&line)
            .with_context(|| format!("writing '{}'", out.display()))?;
    }
    writer
        .flush()
        .with_context(|| format!("writing '{}'", out.display()))?;
    eprintln!(
        "wrote {records} sensor records ({bytes} bytes, {:.0} bytes per record on average) to {}",
        if records > 0 {
            bytes as f64 / records as f64
        } else {
            0.0
        },
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
