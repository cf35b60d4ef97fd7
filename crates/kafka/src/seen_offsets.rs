//! The offset after the last message a consumer handed over, per slot and partition: where
//! brokerbench itself got to in each partition, whatever the client or the broker say later.

/// Per slot, per partition: the offset after the highest one received (0: none received).
#[derive(Debug, Default)]
pub(crate) struct SeenOffsets {
    next: Vec<Vec<i64>>,
}

impl SeenOffsets {
    /// Notes a message at `offset` of `partition`, read for `slot`.
    #[inline]
    pub(crate) fn note(&mut self, slot: usize, partition: i32, offset: i64) {
        let Ok(partition) = usize::try_from(partition) else {
            return;
        };
        if self.next.len() <= slot {
            self.next.resize_with(slot + 1, Vec::new);
        }
        let partitions = &mut self.next[slot];
        if partitions.len() <= partition {
            partitions.resize(partition + 1, 0);
        }
        partitions[partition] = partitions[partition].max(offset.saturating_add(1));
    }

    /// Every (slot, partition) a message was received from, with the offset after the last
    /// one received there.
    pub(crate) fn places(&self) -> impl Iterator<Item = ((usize, i32), i64)> + '_ {
        self.next.iter().enumerate().flat_map(|(slot, partitions)| {
            partitions
                .iter()
                .enumerate()
                .filter(|(_, &next)| next > 0)
                .map(move |(partition, &next)| ((slot, partition as i32), next))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_offset_is_after_the_highest_received_whatever_the_order() {
        let mut seen = SeenOffsets::default();
        seen.note(1, 2, 41);
        seen.note(1, 2, 7);
        seen.note(0, 0, 0);
        // Nothing from slot 1's partitions 0 and 1, nor from slot 3.
        assert_eq!(
            seen.places().collect::<Vec<_>>(),
            [((0, 0), 1), ((1, 2), 42)]
        );
    }
}
