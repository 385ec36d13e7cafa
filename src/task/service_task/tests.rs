//! Loom models over the real `ServiceTaskState` word.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::thread;

use super::state::{ServiceTaskState as S, StateWord};
use crate::loom::Arc;

/// The first run's loop returns on its own while a shutdown stops it and
/// a restart begins: whatever the interleaving, the stale run never
/// overwrites the newer run's state, and a restart that won ends `Running`
/// with its own generation.
#[test]
fn loom_a_stale_run_exit_cannot_overwrite_a_restart() {
    loom::model(|| {
        let word = Arc::new(StateWord::new());
        let (first, _) = word.begin_start().expect("from NotStarted");
        assert!(word.transition(first, S::Starting, S::Running));

        let exit = {
            let word = Arc::clone(&word);
            thread::spawn(move || {
                word.transition(first, S::Running, S::Stopped)
                    || word.transition(first, S::Starting, S::Stopped)
            })
        };
        if let Some(stopping) = word.begin_stop() {
            assert_eq!(stopping, first);
            word.transition(stopping, S::Stopping, S::Stopped);
        }
        let restarted = word.begin_start();
        if let Ok((second, _)) = restarted {
            assert!(second > first);
            assert!(word.transition(second, S::Starting, S::Running));
        }
        exit.join().expect("exit thread");

        let (state, generation) = word.load();
        match restarted {
            Ok((second, _)) => {
                assert_eq!((state, generation), (S::Running, second));
                assert!(word.is_stopped(first), "the old run sees itself replaced");
                assert!(!word.is_stopped(second));
            }
            Err(_) => unreachable!("the shutdown left the word Stopped"),
        }
    });
}

/// Two starts race: exactly one wins a generation; the other sees the
/// winner's state.
#[test]
fn loom_concurrent_starts_admit_exactly_one() {
    loom::model(|| {
        let word = Arc::new(StateWord::new());
        let other = {
            let word = Arc::clone(&word);
            thread::spawn(move || word.begin_start())
        };
        let mine = word.begin_start();
        let theirs = other.join().expect("start thread");
        assert!(
            mine.is_ok() != theirs.is_ok(),
            "one winner: {mine:?} {theirs:?}"
        );
        let loser = mine.err().or(theirs.err()).expect("a loser");
        assert_eq!(loser, S::Starting);
        assert_eq!(word.load(), (S::Starting, 1));
    });
}
