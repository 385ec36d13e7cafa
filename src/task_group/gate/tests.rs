use super::*;

#[derive(Debug)]
struct NoHandle;

impl AbortTarget for NoHandle {
    fn abort(&self) {}
}

#[test]
fn a_deadline_abort_that_lost_the_race_to_completion_is_not_a_timeout() {
    let gate: Gate<NoHandle, ()> = Gate::new(OPEN);
    let (seq, slot) = gate
        .register(
            TaskName::from("t"),
            TaskKind::Worker,
            Some(Instant::now()),
            None,
        )
        .expect("open");
    gate.seal();
    assert_eq!(gate.abort_matching(true, None), 1);
    gate.settle(slot, seq_check(seq), TaskEnd::Completed);
    let counters = gate.snapshot(0).counters;
    assert_eq!(counters.completed, 1);
    assert_eq!(counters.deadline_aborted_settled, 0);
    assert_eq!(counters.live_abort_requested, 0);
}

/// Threads submitting into one group use their own home shards; every
/// task still gets a group-unique sequence, is found by its id, is
/// listed, and is aborted by a walk that started after it registered.
#[test]
fn submitting_threads_spread_over_shards_with_unique_sequences() {
    let gate: std::sync::Arc<Gate<NoHandle, ()>> = std::sync::Arc::new(Gate::new(OPEN));
    let per_thread = 20;
    let keys: Vec<(u64, u32)> = (0..SHARDS * 2)
        .map(|_| {
            let gate = std::sync::Arc::clone(&gate);
            std::thread::spawn(move || {
                (0..per_thread)
                    .map(|_| {
                        gate.register(
                            TaskName::from("t"),
                            TaskKind::Worker,
                            Some(Instant::now()),
                            None,
                        )
                        .expect("open")
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|thread| thread.join().expect("submitter"))
        .collect();
    let total = SHARDS * 2 * per_thread;
    let mut seqs: Vec<u64> = keys.iter().map(|(seq, _)| *seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), total, "sequences are group-unique");
    let shards: std::collections::HashSet<usize> =
        keys.iter().map(|(_, slot)| unpack(*slot).1).collect();
    assert!(shards.len() > 1, "threads used more than one shard");
    assert!(keys.iter().all(|(seq, slot)| gate.contains(*slot, *seq)));
    assert_eq!(gate.snapshot(usize::MAX).listed.len(), total);
    assert_eq!(gate.abort_matching(false, None), total);
    for (seq, slot) in keys {
        gate.settle(slot, seq_check(seq), TaskEnd::Aborted);
        assert!(!gate.contains(slot, seq));
    }
    assert_eq!(gate.len(), 0);
    assert_eq!(gate.snapshot(0).counters.aborted, total);
}
