use super::*;

/// Inserts a worker task `seq`; returns its slot and the handle the
/// slot retained.
fn insert_seq<H>(table: &mut TaskTable<H>, seq: u64) -> (u32, Option<H>) {
    table
        .insert(
            seq,
            TaskName::from("t"),
            TaskKind::Worker,
            Some(Instant::now()),
            None,
        )
        .expect("room")
}

fn insert(table: &mut TaskTable<()>) -> (u64, u32) {
    thread_local!(static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) });
    let seq = NEXT.with(|next| next.replace(next.get() + 1));
    (seq, insert_seq(table, seq).0)
}

#[test]
fn slots_are_reused_but_sequences_never_are() {
    let mut table = TaskTable::new();
    let first = insert(&mut table);
    let second = insert(&mut table);
    assert!(table.remove(first.1, seq_check(first.0)).is_some());
    let third = insert(&mut table);
    assert_eq!(third.1, first.1, "the freed slot is reused");
    assert!(third.0 > second.0);
    assert_ne!(third.0, first.0);
    assert!(
        !table.contains(first.1, first.0),
        "a stale id never matches"
    );
    assert!(table.contains(third.1, third.0));
    assert!(table.remove(first.1, seq_check(first.0)).is_none());
    assert_eq!(table.len(), 2);
    assert!(table.remove(second.1, seq_check(second.0)).is_some());
    assert!(table.remove(third.1, seq_check(third.0)).is_some());
    assert_eq!(table.len(), 0);
    assert_eq!(table.high_water(), 0, "an idle table restarts at slot 0");
}

#[test]
fn growth_crosses_chunks_and_ranges_find_every_record() {
    let mut table = TaskTable::new();
    let keys: Vec<_> = (0..CHUNK_SLOTS * 3 + 5)
        .map(|_| insert(&mut table))
        .collect();
    for (seq, slot) in &keys {
        assert!(table.contains(*slot, *seq));
    }
    // Free every other record, then walk in uneven ranges.
    for (seq, slot) in keys.iter().step_by(2) {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    let mut seen = 0;
    let mut next = 0;
    while next < table.high_water() {
        let end = (next + 7).min(table.high_water());
        seen += table.records_mut(next..end).count();
        next = end;
    }
    assert_eq!(seen, table.len());
    assert_eq!(table.live().count(), table.len());
    for (seq, slot) in keys.iter().skip(1).step_by(2) {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(table.len(), 0);
    assert!(table.chunks.len() <= IDLE_RETAINED_CHUNKS);
}

/// A draining (sealed) table does not compact: the burst stays until
/// the table empties, then it restarts and trims as usual.
#[test]
fn a_table_that_stopped_compacting_only_trims_when_empty() {
    let mut table = TaskTable::new();
    let pinned = insert(&mut table);
    let burst: Vec<_> = (0..5_000).map(|_| insert(&mut table)).collect();
    let chunks = table.chunks.len();
    table.seal();
    for (seq, slot) in &burst {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(table.len(), 1);
    assert_eq!(table.chunks.len(), chunks, "no compaction while draining");
    assert!(table.remove(pinned.1, seq_check(pinned.0)).is_some());
    assert_eq!(table.high_water(), 0);
    assert!(table.chunks.len() <= IDLE_RETAINED_CHUNKS);
}

#[test]
fn a_table_pinned_by_one_long_lived_task_gives_back_a_burst() {
    let mut table = TaskTable::new();
    let pinned = insert(&mut table);
    let burst: Vec<_> = (0..5_000).map(|_| insert(&mut table)).collect();
    assert!(table.chunks.len() > 300);
    for (seq, slot) in &burst {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(table.len(), 1);
    assert!(
        table.contains(pinned.1, pinned.0),
        "live ids keep their slot"
    );
    assert!(
        table.chunks.len() <= 2,
        "{} chunks retained",
        table.chunks.len()
    );
    assert_eq!(table.live().count(), 1);
    let next = insert(&mut table);
    assert!(table.contains(next.1, next.0));
    assert_ne!(next.1, pinned.1);
}

/// Tasks settling in spawn order keep the live records in the last
/// chunks: compaction has nothing to give back and leaves the table
/// alone, and new tasks reuse the freed slots instead of growing it.
#[test]
fn a_burst_settling_in_spawn_order_reuses_its_slots() {
    let mut table = TaskTable::new();
    let burst: Vec<_> = (0..2_000).map(|_| insert(&mut table)).collect();
    let chunks = table.chunks.len();
    for (seq, slot) in &burst[..1_600] {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(table.len(), 400);
    assert_eq!(table.high_water(), 2_000, "the last slot is still live");
    assert_eq!(table.chunks.len(), chunks);
    let refill: Vec<_> = (0..1_000).map(|_| insert(&mut table)).collect();
    // The free list was never rebuilt lowest-first: slots come back in
    // reverse settlement order.
    for (index, (_, slot)) in refill.iter().enumerate() {
        assert_eq!(*slot, burst[1_599 - index].1, "refill {index}");
    }
    assert_eq!(table.high_water(), 2_000, "freed slots were reused");
    assert_eq!(table.chunks.len(), chunks);
    for (seq, slot) in burst[1_600..].iter().chain(&refill) {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(table.len(), 0);
    assert_eq!(table.high_water(), 0);
}

type Cell = std::sync::Arc<()>;

/// Inserts task `seq` and installs a clone of `cell` as its handle;
/// returns the slot and the handle the slot retained.
fn insert_with_handle(table: &mut TaskTable<Cell>, seq: u64, cell: &Cell) -> (u32, Option<Cell>) {
    let (slot, retained) = insert_seq(table, seq);
    table.get_mut(slot, seq).expect("live").handle = Some(Cell::clone(cell));
    (slot, retained)
}

/// An open table keeps a removed record's handle and the next
/// registration takes it (to drop after its lock); a sealed one hands
/// it back at removal.
#[test]
fn kept_handles_go_to_the_next_registration() {
    let cell = Cell::new(());
    let mut table: TaskTable<Cell> = TaskTable::new();
    let register = |table: &mut TaskTable<Cell>, seq: u64| insert_with_handle(table, seq, &cell);
    let (pinned, _) = register(&mut table, 1);
    let (first, none) = register(&mut table, 2);
    assert!(none.is_none(), "nothing kept yet");
    let removed = table.remove(first, seq_check(2)).expect("live");
    assert!(removed.handle.is_none(), "an open table keeps the handle");
    assert_eq!(Cell::strong_count(&cell), 3);
    let (_, kept) = register(&mut table, 3);
    assert!(kept.is_some(), "the registration takes the kept handle");
    drop(kept);
    assert_eq!(Cell::strong_count(&cell), 3, "two live tasks' handles");
    table.seal();
    let removed = table.remove(pinned, seq_check(1)).expect("live");
    assert!(removed.handle.is_some(), "a sealed table hands it back");
    drop(removed);
    assert_eq!(Cell::strong_count(&cell), 2);
}

/// At most `RETAINED_HANDLES` handles are kept: beyond that a removal
/// hands back the oldest kept one.
#[test]
fn kept_handles_are_capped() {
    let cell = Cell::new(());
    let mut table: TaskTable<Cell> = TaskTable::new();
    let _pinned = insert_with_handle(&mut table, 1, &cell);
    let extra = 12;
    let keys: Vec<_> = (2..RETAINED_HANDLES as u64 + 2 + extra)
        .map(|seq| (seq, insert_with_handle(&mut table, seq, &cell).0))
        .collect();
    let handed_back = keys
        .iter()
        .filter(|(seq, slot)| {
            let removed = table.remove(*slot, seq_check(*seq)).expect("live");
            removed.handle.is_some()
        })
        .count();
    assert_eq!(handed_back, extra as usize);
    assert_eq!(table.retained.len(), RETAINED_HANDLES);
    assert_eq!(
        Cell::strong_count(&cell),
        2 + RETAINED_HANDLES,
        "the pinned task's handle and the kept ones"
    );
}

/// An emptied open table keeps a few handles and gives the rest back
/// with its chunks; an emptied sealed table keeps none.
#[test]
fn an_emptied_table_gives_back_kept_handles() {
    for sealed in [false, true] {
        let cell = Cell::new(());
        let mut table: TaskTable<Cell> = TaskTable::new();
        let keys: Vec<_> = (1..=CHUNK_SLOTS as u64 * 3)
            .map(|seq| (seq, insert_with_handle(&mut table, seq, &cell).0))
            .collect();
        let (last, rest) = keys.split_last().expect("tasks");
        for (seq, slot) in rest {
            drop(table.remove(*slot, seq_check(*seq)).expect("live"));
        }
        if sealed {
            table.seal();
        }
        let emptying = table.remove(last.1, seq_check(last.0)).expect("live");
        assert!(table.chunks.len() <= IDLE_RETAINED_CHUNKS);
        drop(emptying);
        let kept = if sealed { 0 } else { IDLE_RETAINED_HANDLES };
        assert_eq!(table.retained.len(), kept);
        assert_eq!(Cell::strong_count(&cell), 1 + kept, "sealed: {sealed}");
    }
}

#[test]
fn heap_names_are_released_at_settlement() {
    let mut table: TaskTable<()> = TaskTable::new();
    let name = std::sync::Arc::<str>::from("conn");
    let (slot, _) = table
        .insert(
            1,
            TaskName::from(&name),
            TaskKind::Worker,
            Some(Instant::now()),
            None,
        )
        .expect("room");
    let _keep = insert(&mut table);
    assert_eq!(std::sync::Arc::strong_count(&name), 2);
    assert!(table.remove(slot, seq_check(1)).is_some());
    assert_eq!(
        std::sync::Arc::strong_count(&name),
        1,
        "released without reuse"
    );
}

/// The live list's sequences, oldest first.
fn live_seqs(table: &TaskTable<()>) -> Vec<u64> {
    table.live().map(|(_, record, _)| record.seq()).collect()
}

#[test]
fn the_live_list_follows_registration_order_through_removal_and_reuse() {
    let mut table = TaskTable::new();
    let mut model: Vec<(u64, u32)> = Vec::new();
    // A deterministic mix of insertions and removals (head, middle, tail),
    // checked against a plain vector after every step.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for step in 0..5_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if model.is_empty() || state % 3 != 0 {
            model.push(insert(&mut table));
        } else {
            let index = (state >> 8) as usize % model.len();
            let (seq, slot) = model.remove(index);
            assert!(table.remove(slot, seq_check(seq)).is_some());
        }
        if step % 97 == 0 || model.len() < 3 {
            let expected: Vec<u64> = model.iter().map(|(seq, _)| *seq).collect();
            assert_eq!(live_seqs(&table), expected, "after step {step}");
        }
    }
    let expected: Vec<u64> = model.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(live_seqs(&table), expected);
    let slots: Vec<u32> = table.live().map(|(slot, _, _)| slot).collect();
    assert_eq!(
        slots,
        model.iter().map(|(_, slot)| *slot).collect::<Vec<_>>()
    );
}

#[test]
fn a_sparse_table_is_walked_by_its_live_records_only() {
    let mut table = TaskTable::new();
    let keys: Vec<(u64, u32)> = (0..4_096).map(|_| insert(&mut table)).collect();
    // Everything but the three newest tasks settles: the last chunk stays
    // pinned, so the table keeps its high water.
    for (seq, slot) in &keys[..4_093] {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert!(table.high_water() >= 4_093, "pinned by the newest tasks");
    let expected: Vec<u64> = keys[4_093..].iter().map(|(seq, _)| *seq).collect();
    assert_eq!(live_seqs(&table), expected);
    // The walk visits exactly the live records: taking one visits one.
    assert_eq!(table.live().take(1).count(), 1);
    for (seq, slot) in &keys[4_093..] {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(table.live().count(), 0);
    let again = insert(&mut table);
    assert_eq!(
        live_seqs(&table),
        vec![again.0],
        "an emptied table restarts its list"
    );
}

#[test]
fn a_sealed_table_keeps_stale_entries_until_it_empties() {
    let mut table = TaskTable::new();
    let keys: Vec<(u64, u32)> = (0..40).map(|_| insert(&mut table)).collect();
    table.seal();
    // Drain out of order: every other task, then the rest.
    for (seq, slot) in keys.iter().step_by(2) {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    let expected: Vec<u64> = keys
        .iter()
        .skip(1)
        .step_by(2)
        .map(|(seq, _)| *seq)
        .collect();
    assert_eq!(live_seqs(&table), expected, "live records, oldest first");
    assert_eq!(table.entries().count(), 40, "stale entries stay listed");
    assert_eq!(table.entries().filter(Option::is_none).count(), 20);
    for (seq, slot) in keys.iter().skip(1).step_by(2) {
        assert!(table.remove(*slot, seq_check(*seq)).is_some());
    }
    assert_eq!(
        table.entries().count(),
        0,
        "an emptied table drops its list"
    );
}
