//! The budget-tree models, as a test target: competing acquirers and a
//! release never take a level past its limit (packed and unpacked levels),
//! a resize or rebind racing a dynamic key's close is charged before it or
//! refused, a queue push racing the first age observation is stamped, and
//! the release counter wraps without a lost or doubled release. They drive
//! the real reserve-and-rollback code (`src/resource_budget/tree.rs`,
//! `usage.rs`, `queue.rs`) through the crate's loom shim, so they run only
//! in a `--cfg loom` build (without it this target is empty):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test --release --test resource_budget_loom
//! ```
//!
//! The same models run as the library's unit tests (`--lib loom`, in CI).
#![cfg(loom)]

use rocketmq_runtime::loom_models::resource_budget as models;

#[test]
fn competing_acquirers_and_a_release_never_exceed_a_level() {
    models::loom_competing_acquirers_and_a_release_never_exceed_a_level();
}

#[test]
fn competing_acquirers_with_an_unpacked_root() {
    models::loom_competing_acquirers_with_an_unpacked_root();
}

#[test]
fn resize_racing_a_key_close_is_charged_before_it_or_refused() {
    models::loom_resize_racing_a_key_close_is_charged_before_it_or_refused();
}

#[test]
fn rebind_racing_a_key_close_is_charged_before_it_or_refused() {
    models::loom_rebind_racing_a_key_close_is_charged_before_it_or_refused();
}

#[test]
fn a_push_racing_the_first_observation_is_stamped() {
    models::loom_a_push_racing_the_first_observation_is_stamped();
}

#[test]
fn release_counter_wraps_without_a_lost_or_doubled_release() {
    models::loom_release_counter_wraps_without_a_lost_or_doubled_release();
}

#[test]
fn an_accepted_push_racing_a_close_reaches_the_consumer() {
    models::loom_an_accepted_push_racing_a_close_reaches_the_consumer();
}

#[test]
fn a_pop_releasing_after_its_lock_never_lets_a_push_past_capacity() {
    models::loom_a_pop_releasing_after_its_lock_never_lets_a_push_past_capacity();
}
