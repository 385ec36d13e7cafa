//! The task-group shutdown models, as a test target: a spawn racing the
//! shutdown seal is registered (then joined or aborted by that shutdown) or
//! refused, never lost; aborts racing handle installation, poisoning racing
//! the seal, settlements racing reports and idle watchers. They drive the
//! real spawn gate (`src/task_group/gate.rs`) through the crate's loom shim,
//! so they run only in a `--cfg loom` build (without it this target is
//! empty):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test --release --test task_group_shutdown_loom
//! ```
//!
//! The same models run as the library's unit tests (`--lib loom`, in CI).
#![cfg(loom)]

use rocketmq_runtime::loom_models::task_group as models;

#[test]
fn spawn_racing_shutdown_is_registered_or_rejected() {
    models::loom_spawn_racing_shutdown_is_registered_or_rejected();
}

#[test]
fn abort_racing_handle_installation_is_honoured() {
    models::loom_abort_racing_handle_installation_is_honoured();
}

#[test]
fn panic_poisons_only_an_open_group_once() {
    models::loom_panic_poisons_only_an_open_group_once();
}

#[test]
fn no_poisoning_after_the_seal() {
    models::loom_no_poisoning_after_the_seal();
}

#[test]
fn an_open_gate_never_counts_a_busy_group_as_empty() {
    models::loom_an_open_gate_never_counts_a_busy_group_as_empty();
}

#[test]
fn last_settlements_in_two_shards_report_the_group_idle() {
    models::loom_last_settlements_in_two_shards_report_the_group_idle();
}

#[test]
fn settlement_racing_a_walk_and_a_report_is_counted_once() {
    models::loom_settlement_racing_a_walk_and_a_report_is_counted_once();
}

#[test]
fn a_table_skipping_idle_checks_still_reports_its_last_settlement() {
    models::loom_a_table_skipping_idle_checks_still_reports_its_last_settlement();
}

#[test]
fn an_idle_watcher_is_never_left_waiting() {
    models::loom_an_idle_watcher_is_never_left_waiting();
}

#[test]
fn a_stamp_racing_settlement_and_slot_reuse_stamps_only_its_task() {
    models::loom_a_stamp_racing_settlement_and_slot_reuse_stamps_only_its_task();
}

#[test]
fn a_full_batch_behind_a_held_table_lock_is_applied_later() {
    models::loom_a_full_batch_behind_a_held_table_lock_is_applied_later();
}
