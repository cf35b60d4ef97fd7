//! The bundled client-scale studies' largest cells on the managed Kafka: 1,000 topics, 1,000
//! partitions, 64 producers and 64 consumers. Every run completes (the rate reached is the
//! machine's business; the runs must not fail or hang).

use crate::common::serial;
use crate::studies::{assert_all_complete, one_cell_of, run_quick};

use super::kafka;

fn largest_cell(study: &str) {
    let _s = serial();
    kafka();
    let scratch = tempfile::tempdir().unwrap();
    let file = one_cell_of(study, 3, scratch.path());
    let (_dir, folder, stdout) = run_quick(&file, &[]);
    assert_all_complete(&folder, 1, &stdout);
}

#[test]
fn a_thousand_topics_of_client_scale_topics() {
    largest_cell("client-scale-topics");
}

#[test]
fn a_thousand_partitions_of_client_scale_partitions() {
    largest_cell("client-scale-partitions");
}

#[test]
fn sixty_four_producers_and_consumers_of_client_scale_tasks() {
    largest_cell("client-scale-tasks");
}
