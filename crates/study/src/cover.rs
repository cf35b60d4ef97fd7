//! A covering subset of a study's grid (`--cover`): enough cells that every value of every
//! axis is run once. Cell `i` of the cover takes point `i` of each axis, wrapping around a
//! shorter axis, so the cover has as many cells as the longest axis has points: 4 of the 48
//! of a 4 × 4 × 3 grid. A smoke test of a big grid in minutes, before the hours of the whole.

use std::collections::BTreeSet;

use crate::plan::PlannedRun;
use crate::Study;

/// The grid numbers (0-based, first axis outermost, as [`PlannedRun::cell`]) of the cover.
pub fn covering_cells(study: &Study) -> BTreeSet<usize> {
    let lengths: Vec<usize> = study.axes.iter().map(|a| a.points.len()).collect();
    let longest = lengths.iter().copied().max().unwrap_or(1);
    (0..longest)
        .map(|i| grid_number(&lengths, |axis| i % lengths[axis]))
        .collect()
}

/// The grid number of the cell whose point on axis `a` is `point(a)`.
fn grid_number(lengths: &[usize], point: impl Fn(usize) -> usize) -> usize {
    lengths
        .iter()
        .enumerate()
        .fold(0, |number, (axis, &length)| number * length + point(axis))
}

/// Keeps the runs of the cover, and beside each the item of `with` at its place (its key).
pub fn keep_covering<T>(
    study: &Study,
    runs: Vec<PlannedRun>,
    with: Vec<T>,
) -> (Vec<PlannedRun>, Vec<T>) {
    let cover = covering_cells(study);
    runs.into_iter()
        .zip(with)
        .filter(|(run, _)| cover.contains(&run.cell))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_runs;
    use std::path::Path;

    fn study(text: &str) -> Study {
        Study::parse(Path::new("/tmp/s.yaml"), text).unwrap()
    }

    #[test]
    fn every_value_of_every_axis_runs_once_in_as_many_cells_as_the_longest_axis() {
        let s = study(
            "name: t\naxes:\n  rate: [100, 200, 300, 400]\n  message_size: [10, 20, 30, 40]\n  producer_config.acks: [\"0\", \"1\", all]\nrepetitions: 3\n",
        );
        let all = plan_runs(&s, &[], true).unwrap();
        assert_eq!(all.len(), 48);
        let keys: Vec<usize> = (0..all.len()).collect();
        let (runs, kept) = keep_covering(&s, all.clone(), keys);
        let labels: Vec<String> = runs.iter().map(PlannedRun::cell_label).collect();
        assert_eq!(
            labels,
            [
                "rate=100, message_size=10, producer_config.acks=0",
                "rate=200, message_size=20, producer_config.acks=1",
                "rate=300, message_size=30, producer_config.acks=all",
                "rate=400, message_size=40, producer_config.acks=0",
            ]
        );
        // Each kept run's companion is its own.
        for (run, &k) in runs.iter().zip(&kept) {
            assert_eq!(run.cell_label(), all[k].cell_label());
        }
    }

    #[test]
    fn a_study_without_axes_or_with_one_keeps_every_cell() {
        let none = study("name: t\n");
        assert_eq!(covering_cells(&none), BTreeSet::from([0]));
        let one = study("name: t\naxes:\n  rate: [100, 200, 300]\n");
        assert_eq!(covering_cells(&one), BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn repetitions_of_a_covered_cell_all_stay() {
        let s =
            study("name: t\naxes:\n  rate: [100, 200]\n  message_size: [10, 20]\nrepetitions: 2\n");
        let all = plan_runs(&s, &[], false).unwrap();
        let n = all.len();
        let (runs, _) = keep_covering(&s, all, vec![(); n]);
        let cells: Vec<(usize, u32)> = runs.iter().map(|r| (r.cell, r.repetition)).collect();
        assert_eq!(cells, [(0, 1), (3, 1), (0, 2), (3, 2)]);
    }
}
