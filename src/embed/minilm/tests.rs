//! Unit tests of `minilm`.

use super::*;
use proptest::prelude::*;

fn batches(lengths: &[usize], batch_size: usize) -> Vec<Vec<usize>> {
    let mut start = 0;
    batch_ends(lengths, batch_size)
        .into_iter()
        .map(|end| {
            let batch = lengths[start..end].to_vec();
            start = end;
            batch
        })
        .collect()
}

#[test]
fn batches_have_equal_token_counts() {
    let short: Vec<Vec<usize>> = batches(&[39; 32], 32);
    assert_eq!(short.iter().map(Vec::len).collect::<Vec<_>>(), [16, 16]);
    let long = batches(&[195; 32], 32);
    assert_eq!(long.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 5, 5, 5, 5, 2]);
    let cut = batches(&[256; 9], 32);
    assert_eq!(cut.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 3]);
    assert_eq!(batches(&[10; 5], 2).iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    assert!(batch_ends(&[], 32).is_empty());
}

proptest! {
    #[test]
    fn batches_cover_every_passage_within_the_bounds(
        mut lengths in proptest::collection::vec(1usize..=1500, 0..80),
        batch_size in 1usize..40,
    ) {
        lengths.sort_by(|a, b| b.cmp(a));
        let split = batches(&lengths, batch_size);
        prop_assert_eq!(split.concat(), lengths);
        for batch in &split {
            prop_assert!(!batch.is_empty() && batch.len() <= batch_size);
            prop_assert!(batch.len() == 1 || batch.iter().sum::<usize>() <= BATCH_TOKENS_MAX, "{:?}", batch);
        }
    }
}
