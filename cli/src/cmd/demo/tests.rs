use super::*;

#[test]
fn the_default_create_latency_keeps_the_creates_within_their_budget() {
    for (peers, us) in [(1, 20), (64, 20), (100_000, 20), (100_001, 19), (200_000, 10), (1_000_000, 2)] {
        assert_eq!(default_create_latency_us(peers), us, "{peers}");
    }
    for peers in [1, 1_000, 100_000, 333_333, 1_000_000] {
        let us = default_create_latency_us(peers);
        assert!(peers as u64 * us <= DEFAULT_CREATES_US, "{peers}");
        assert!(peers as u64 * us <= MAX_CREATES_US, "{peers}");
    }
}

#[test]
fn the_table_is_at_most_half_full() {
    for (peers, slots) in
        [(1, 1 << 14), (8_192, 1 << 14), (8_193, 1 << 16), (10_000, 1 << 16), (100_000, 1 << 18), (1_000_000, 1 << 21)]
    {
        assert_eq!(table_slots(peers), slots, "{peers}");
    }
    for peers in [1, 64, 1_000, 8_193, 500_000, MAX_PEERS] {
        assert!(peers * 2 <= table_slots(peers), "{peers}");
    }
}

#[test]
fn a_completion_of_the_corpus_is_76_bytes() {
    assert_eq!(core::mem::size_of::<Completion>(), 76);
}

#[test]
fn the_timings_have_room_for_every_batch() {
    let c = Completion { wc: MockWc::default(), area: [0; 40] };
    for (ib, roce, per_thread) in [(1, 1, 1), (176, 336, 4_000_000), (0, 5, 1_000), (65, 0, 130), (3, 7, 64)] {
        let corpus = Corpus { ib: vec![c; ib], roce: vec![c; roce] };
        // The batches `work` times: its stream choice and wraps, counted.
        let (mut at, mut taken, mut done, mut batches) = ([0usize; 2], [0u64; 2], 0u64, 0usize);
        let lens = [ib as u128, roce as u128];
        while done < per_thread {
            let roce = roce_next(taken, lens);
            let s = usize::from(roce);
            let len = corpus.stream(roce).len();
            if at[s] >= len {
                at[s] = 0;
            }
            let n = ((per_thread - done).min(BATCH as u64) as usize).min(len - at[s]);
            at[s] += n;
            taken[s] += n as u64;
            done += n as u64;
            batches += 1;
        }
        assert!(batches <= max_batches(&corpus, per_thread), "{ib} {roce} {per_thread}: {batches}");
        // Each port got its share of the completions, give or take a batch.
        if ib > 0 && roce > 0 {
            let share = per_thread as f64 * ib as f64 / (ib + roce) as f64;
            assert!((taken[0] as f64 - share).abs() <= BATCH as f64, "{ib} {roce} {per_thread}: {taken:?}");
        }
    }
}
