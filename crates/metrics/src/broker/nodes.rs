//! A cluster's per-node figures: what a spec marked `per_node` comes to on each node's
//! endpoint alone, beside the figure of the cluster as a whole.

use super::{interpret, BrokerMetrics, MetricSpec, Reading};
use crate::text::Sample;

impl BrokerMetrics {
    /// The names of a reading's values, in order: every spec's key, then, read from a
    /// cluster, `<key>_node<id>` for each per-node spec and each node (node 1's first).
    pub fn columns(&self) -> Vec<String> {
        let keys = self.set.specs.iter().map(|spec| spec.key.to_string());
        let per_node = self.per_node_specs().flat_map(|(_, spec)| {
            self.node_ids()
                .map(move |id| format!("{}_node{id}", spec.key))
        });
        keys.chain(per_node).collect()
    }

    /// Each endpoint's node id, node 1's first.
    fn node_ids(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::once(self.first).chain(self.others.iter().map(|(id, _)| *id))
    }

    /// The specs given per node (with their index), when a cluster is read.
    fn per_node_specs(&self) -> impl Iterator<Item = (usize, &'static MetricSpec)> {
        let cluster = !self.others.is_empty();
        let specs: &'static [MetricSpec] = self.set.specs;
        specs
            .iter()
            .enumerate()
            .filter(move |(_, spec)| cluster && spec.per_node)
    }

    /// The per-node values of one scrape, in the order of the columns, from each node's fresh
    /// answer (`fresh`, node 1's first): none for a node that did not answer, whose rates
    /// start again from its next answer.
    pub(super) fn per_node(
        &mut self,
        fresh: &[Option<Vec<Sample>>],
        now_ns: u64,
    ) -> Vec<Option<f64>> {
        if self.per_node_specs().next().is_none() {
            return Vec::new();
        }
        self.node_previous.resize(fresh.len(), None);
        let readings: Vec<Option<Reading>> = fresh
            .iter()
            .zip(&self.node_previous)
            .map(|(samples, previous)| {
                let samples = samples.as_ref()?;
                Some(interpret(
                    self.set.specs,
                    previous.as_ref(),
                    samples,
                    now_ns,
                ))
            })
            .collect();
        let values = self
            .per_node_specs()
            .flat_map(|(i, _)| {
                readings
                    .iter()
                    .map(move |r| r.as_ref().and_then(|r| r.values[i]))
            })
            .collect();
        self.node_previous = readings;
        values
    }
}
