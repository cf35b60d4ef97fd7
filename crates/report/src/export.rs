//! Whole-run exports: one type per file format, each turning the summary into the bytes of
//! one file of the results folder. summary.json is the first; an HTML report can follow.

use std::io;

use brokerbench_model::Summary;

/// Name of the summary file in the results folder.
pub const SUMMARY_FILE: &str = "summary.json";

/// A file written once from the final summary.
pub trait Export {
    /// Name of the file inside the results folder, e.g. `summary.json`.
    fn file_name(&self) -> &'static str;
    /// The complete contents of the file.
    fn bytes(&self, summary: &Summary) -> io::Result<Vec<u8>>;
}

/// summary.json: the [`Summary`] as pretty-printed JSON. Its top-level keys are pinned by
/// `summary-keys.txt` so that changing them is a deliberate act.
pub struct SummaryJson;

impl Export for SummaryJson {
    fn file_name(&self) -> &'static str {
        SUMMARY_FILE
    }

    fn bytes(&self, summary: &Summary) -> io::Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(summary)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::summary;

    #[test]
    fn summary_json_top_level_keys_are_the_committed_ones() {
        let bytes = SummaryJson.bytes(&summary()).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let mut actual: Vec<&str> = value
            .as_object()
            .expect("summary.json is an object")
            .keys()
            .map(String::as_str)
            .collect();
        actual.sort_unstable();
        let mut committed: Vec<&str> = include_str!("../summary-keys.txt")
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        committed.sort_unstable();
        assert_eq!(
            actual, committed,
            "summary.json's top-level keys changed; if that is deliberate, update \
             crates/report/summary-keys.txt (and tell users of summary.json)"
        );
    }

    #[test]
    fn summary_json_reads_back() {
        let bytes = SummaryJson.bytes(&summary()).unwrap();
        let back: Summary = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, summary());
    }
}
