use super::*;

fn is_packed(usage: &Usage) -> bool {
    matches!(usage.repr, Repr::Packed { .. })
}

#[test]
fn packed_and_split_enforce_both_limits() {
    for (count_limit, bytes_limit) in [(3, 100), (usize::MAX, 100)] {
        let usage = Usage::new(count_limit, bytes_limit);
        assert_eq!(usage.try_add(1, 60, count_limit, bytes_limit), Ok(()));
        assert_eq!(
            usage.try_add(1, 41, count_limit, bytes_limit),
            Err(BudgetDimension::Bytes)
        );
        assert_eq!(usage.load(), (1, 60), "a refusal changes nothing");
        assert_eq!(usage.try_add(1, 40, count_limit, bytes_limit), Ok(()));
        usage.sub(1, 60);
        assert_eq!(usage.load(), (1, 40));
        usage.sub(1, 40);
        assert_eq!(usage.load(), (0, 0));
    }
    let packed = Usage::new(3, 100);
    assert!(is_packed(&packed) && packed.counts_releases_in_word());
    for _ in 0..3 {
        packed.try_add(1, 0, 3, 100).expect("room");
    }
    assert_eq!(packed.try_add(1, 0, 3, 100), Err(BudgetDimension::Count));
    assert!(!is_packed(&Usage::new(usize::MAX, 1)));
}

#[test]
fn full_width_limits_pack_without_overflow() {
    // 24 + 40 bits: both fields at their maximum, no room to count
    // releases in the word.
    let count_limit = (1 << 24) - 1;
    let bytes_limit = (1 << 40) - 1;
    let usage = Usage::new(count_limit, bytes_limit);
    assert!(is_packed(&usage) && !usage.counts_releases_in_word());
    usage
        .try_add(count_limit, bytes_limit, count_limit, bytes_limit)
        .expect("exactly full");
    usage.admitted(count_limit);
    assert_eq!(usage.load(), (count_limit, bytes_limit));
    assert_eq!(
        usage.try_add(0, 1, count_limit, bytes_limit),
        Err(BudgetDimension::Bytes)
    );
    usage.release(count_limit, bytes_limit);
    assert_eq!(usage.load(), (0, 0));
    let counts = usage.counts();
    assert_eq!(
        (counts.admitted, counts.released),
        (count_limit as u64, count_limit as u64)
    );
    // Zero limits: zero bits.
    let empty = Usage::new(0, 0);
    assert_eq!(empty.try_add(0, 0, 0, 0), Ok(()));
    assert_eq!(empty.try_add(1, 0, 0, 0), Err(BudgetDimension::Count));
}

/// Admissions and releases are counted exactly in every representation,
/// across many wraps of a narrow in-word release counter; a rolled-back
/// reservation counts as neither.
#[test]
fn admissions_and_releases_are_counted_exactly_across_counter_wraps() {
    let cases = [
        // One release bit: the counter wraps every other release.
        Usage::with_min_release_bits(3, (1 << 61) - 1, 1),
        Usage::new(3, 100),
        Usage::new((1 << 24) - 1, (1 << 40) - 1),
        Usage::new(usize::MAX, 100),
    ];
    for usage in cases {
        let mut released = 0_u64;
        for round in 0..1_000_u64 {
            usage.try_add(1, 7, 3, 100).expect("room");
            usage.admitted(1);
            usage.try_add(1, 5, 3, 100).expect("room");
            usage.admitted(1);
            // A third that does not stand.
            usage.try_add(1, 1, 3, 100).expect("room");
            usage.admitted(1);
            usage.undo(1, 1);
            usage.release(1, 7);
            released += 1;
            if round % 2 == 0 {
                usage.release(1, 5);
            } else {
                usage.try_add(0, 3, 3, 100).expect("room");
                usage.release(0, 3);
                usage.release(1, 5);
            }
            released += 1;
            let counts = usage.counts();
            assert_eq!(
                counts,
                UsageCounts {
                    count: 0,
                    bytes: 0,
                    admitted: released,
                    released,
                }
            );
        }
    }
    let narrow = Usage::with_min_release_bits(3, (1 << 61) - 1, 1);
    assert!(narrow.counts_releases_in_word());
    narrow.try_add(3, 0, 3, (1 << 61) - 1).expect("room");
    narrow.release(3, 0);
    assert_eq!(
        narrow.counts().released,
        3,
        "a multi-count release wraps once"
    );
}

/// Threads admitting and releasing through a one-bit in-word counter
/// (a wrap every other release) while another snapshots: admissions
/// and releases never go backwards, releases never pass admissions,
/// and the totals end exact.
#[test]
fn concurrent_releases_and_snapshots_count_exactly_across_wraps() {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 20_000;
    let bytes_limit = (1 << 61) - 1;
    let usage = Usage::with_min_release_bits(3, bytes_limit, 1);
    assert!(usage.counts_releases_in_word());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    let mut admitted = 0;
                    while admitted < ROUNDS {
                        if usage.try_add(1, 8, 3, bytes_limit).is_ok() {
                            usage.admitted(1);
                            admitted += 1;
                            usage.release(1, 8);
                        }
                    }
                })
            })
            .collect();
        scope.spawn(|| {
            let mut last = usage.counts();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let seen = usage.counts();
                assert!(seen.admitted >= last.admitted, "{seen:?} after {last:?}");
                assert!(seen.released >= last.released, "{seen:?} after {last:?}");
                assert!(seen.released <= seen.admitted, "{seen:?}");
                assert!(seen.count <= 3, "{seen:?}");
                last = seen;
            }
        });
        for worker in workers {
            worker.join().expect("worker");
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let total = THREADS * ROUNDS;
    assert_eq!(
        usage.counts(),
        UsageCounts {
            count: 0,
            bytes: 0,
            admitted: total,
            released: total,
        }
    );
}
