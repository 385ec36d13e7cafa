//! Blocking admission: one global capacity shared by lanes, per-lane
//! ceilings and reservations, FIFO waiters and direct hand-off.
//!
//! Invariants:
//!
//! 1. All decisions are made under one lock ([`AdmissionBudget::state`]) over
//!    the whole state (global count, lane counts, FIFO queues), not atomics:
//!    every decision needs several lanes' counts at once (reservation
//!    protection, dispatch preference), the critical sections are a few
//!    comparisons, and a blocking submission already pays a thread hand-off
//!    that dwarfs the lock.
//! 2. `running ≤ capacity`, every lane's `running ≤ ceiling`, and a granted
//!    waiter holds exactly one counted slot.
//! 3. A submission is admitted at once only when its lane has no waiter (a
//!    new request never passes a queued waiter of its own lane: FIFO, no
//!    overtaking), the lane is below its ceiling, and a global slot is free.
//!    A lane at or above its reservation *borrows*: it also needs the free
//!    slots to exceed the *protected* reservations, the unused reservation of
//!    every other lane that has a waiter. Otherwise it queues at the back of
//!    its lane, or is refused when the lane's queue is full.
//! 4. A release (a permit dropped) or a withdrawal dispatches at once: it
//!    frees one global and one lane slot and hands slots straight to waiters;
//!    among the lanes whose front waiter can be admitted, lanes still below
//!    their reservation first, then the earliest arrival.
//! 5. The chosen waiter is marked granted under the lock and woken alone
//!    (each waiter has its own `Notify`) after the lock is released.
//! 6. A waiter that gives up (timeout, cancellation, closed scope) leaves its
//!    queue; if it had already been granted, it gives the slot back through a
//!    release (which dispatches again), so the slot is never counted twice
//!    (loom-modelled, with a release racing a timing-out waiter and a waiter
//!    waiting for its grant).
//! 7. Drain-lease submissions wait for room in a full lane queue instead of
//!    being refused: they register as space watchers before they re-check,
//!    and every release or withdrawal wakes all watchers (after the lock is
//!    released) while any are registered, so a slot freed between their
//!    check and their wait is not missed. Without watchers the hot paths
//!    read one atomic.

use std::collections::VecDeque;

use tokio::sync::Notify;

use crate::loom::{Arc, AtomicBool, AtomicUsize, Mutex, Ordering};

/// The limits of one lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneLimits {
    /// Closures of this lane running at once.
    pub(crate) ceiling: usize,
    /// Slots kept for this lane while it has a waiter.
    pub(crate) reservation: usize,
    /// Submissions of this lane waiting at once.
    pub(crate) max_queue_depth: usize,
}

/// A queued submission.
#[derive(Debug)]
pub(crate) struct Waiter {
    lane: usize,
    arrival: u64,
    /// Set under the admission lock when a slot is handed to this waiter.
    granted: AtomicBool,
    /// Woken once, after the grant.
    pub(crate) notify: Notify,
}

impl Waiter {
    pub(crate) fn is_granted(&self) -> bool {
        self.granted.load(Ordering::Acquire)
    }
}

#[derive(Debug)]
struct LaneState {
    limits: LaneLimits,
    running: usize,
    waiters: VecDeque<Arc<Waiter>>,
}

#[derive(Debug)]
struct AdmissionState {
    running: usize,
    next_arrival: u64,
    lanes: Vec<LaneState>,
}

impl AdmissionState {
    /// Unused reservation of the lanes other than `lane` that have a waiter.
    fn protected_for_others(&self, lane: usize) -> usize {
        self.lanes
            .iter()
            .enumerate()
            .filter(|(index, state)| *index != lane && !state.waiters.is_empty())
            .map(|(_, state)| state.limits.reservation.saturating_sub(state.running))
            .sum()
    }

    /// Whether one more closure of `lane` may run now: below its ceiling,
    /// and a free slot; a lane at or above its reservation borrows, so it
    /// also leaves the protected reservations of waiting lanes alone.
    fn can_run(&self, capacity: usize, lane: usize) -> bool {
        let state = &self.lanes[lane];
        let free = capacity.saturating_sub(self.running);
        if state.running >= state.limits.ceiling || free == 0 {
            return false;
        }
        state.running < state.limits.reservation || free > self.protected_for_others(lane)
    }

    fn take_slot(&mut self, lane: usize) {
        self.running += 1;
        self.lanes[lane].running += 1;
    }

    /// Hands free slots to waiters; returns the waiters to wake.
    fn dispatch(&mut self, capacity: usize) -> Vec<Arc<Waiter>> {
        let mut granted = Vec::new();
        loop {
            let mut best: Option<(bool, u64, usize)> = None;
            for (lane, state) in self.lanes.iter().enumerate() {
                let Some(front) = state.waiters.front() else {
                    continue;
                };
                if !self.can_run(capacity, lane) {
                    continue;
                }
                // Lanes below their reservation first, then arrival order.
                let key = (
                    state.running >= state.limits.reservation,
                    front.arrival,
                    lane,
                );
                if best.is_none_or(|current| key < current) {
                    best = Some(key);
                }
            }
            let Some((_, _, lane)) = best else {
                return granted;
            };
            let Some(waiter) = self.lanes[lane].waiters.pop_front() else {
                return granted;
            };
            self.take_slot(lane);
            waiter.granted.store(true, Ordering::Release);
            granted.push(waiter);
        }
    }
}

/// Counts as a running closure of its lane until dropped (a release).
#[derive(Debug)]
pub(crate) struct AdmissionPermit {
    budget: Arc<AdmissionBudget>,
    lane: usize,
}

impl Drop for AdmissionPermit {
    fn drop(&mut self) {
        self.budget.release(self.lane);
    }
}

/// The answer to [`AdmissionBudget::admit`].
#[derive(Debug)]
pub(crate) enum Admission {
    /// Admitted at once.
    Running(AdmissionPermit),
    /// Queued until a release grants it a slot.
    Queued(QueuedAdmission),
    /// The lane's queue is full.
    QueueFull,
}

/// A queued submission; dropping it before the grant is claimed withdraws
/// it (and gives back a slot granted meanwhile).
#[derive(Debug)]
pub(crate) struct QueuedAdmission {
    budget: Arc<AdmissionBudget>,
    waiter: Option<Arc<Waiter>>,
}

impl QueuedAdmission {
    /// The permit, if a slot was handed to this submission.
    pub(crate) fn try_claim(&mut self) -> Option<AdmissionPermit> {
        let waiter = self.waiter.as_ref()?;
        if !waiter.is_granted() {
            return None;
        }
        let lane = waiter.lane;
        self.waiter = None;
        Some(self.budget.permit(lane))
    }

    /// Waits until a slot is handed to this submission.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future keeps the place in the queue;
    /// dropping the `QueuedAdmission` leaves it.
    pub(crate) async fn granted(&mut self) -> AdmissionPermit {
        loop {
            if let Some(permit) = self.try_claim() {
                return permit;
            }
            let Some(waiter) = self.waiter.as_ref() else {
                // Claimed already: unreachable through `granted` itself.
                std::future::pending::<()>().await;
                continue;
            };
            // `notify_one` stores a permit: a grant between the check and
            // this wait is not missed.
            waiter.notify.notified().await;
        }
    }
}

impl Drop for QueuedAdmission {
    fn drop(&mut self) {
        if let Some(waiter) = self.waiter.take() {
            drop(self.budget.withdraw(&waiter));
        }
    }
}

/// One global blocking capacity shared by a set of lanes.
#[derive(Debug)]
pub(crate) struct AdmissionBudget {
    capacity: usize,
    state: Mutex<AdmissionState>,
    /// Woken (all waiters) when a queue may have gained room, while
    /// `space_watchers` is non-zero.
    space: Notify,
    space_watchers: AtomicUsize,
}

/// A registered interest in queue room; dropping it unregisters.
#[derive(Debug)]
pub(crate) struct SpaceWatch {
    budget: Arc<AdmissionBudget>,
}

impl SpaceWatch {
    /// Woken when a queue of the budget may have gained room.
    pub(crate) fn space(&self) -> &Notify {
        &self.budget.space
    }
}

impl Drop for SpaceWatch {
    fn drop(&mut self) {
        self.budget.space_watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A point-in-time view of one lane's admission state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneCounts {
    pub(crate) global_capacity: usize,
    pub(crate) global_running: usize,
    pub(crate) lane_running: usize,
    pub(crate) lane_reserved: usize,
    pub(crate) queued: usize,
}

impl AdmissionBudget {
    pub(crate) fn new(capacity: usize, lanes: &[LaneLimits]) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            state: Mutex::new(AdmissionState {
                running: 0,
                next_arrival: 0,
                lanes: lanes
                    .iter()
                    .map(|limits| LaneState {
                        limits: *limits,
                        running: 0,
                        waiters: VecDeque::new(),
                    })
                    .collect(),
            }),
            space: Notify::new(),
            space_watchers: AtomicUsize::new(0),
        })
    }

    /// Registers interest in queue room: create the watch, enable a
    /// `space().notified()` future, then re-check `admit` before waiting.
    pub(crate) fn watch_space(self: &Arc<Self>) -> SpaceWatch {
        self.space_watchers.fetch_add(1, Ordering::SeqCst);
        SpaceWatch {
            budget: Arc::clone(self),
        }
    }

    /// Wakes the space watchers, if any (after the lock is released).
    fn wake_space_watchers(&self) {
        if self.space_watchers.load(Ordering::SeqCst) > 0 {
            self.space.notify_waiters();
        }
    }

    /// Admits a closure of `lane` at once, queues it, or refuses it.
    pub(crate) fn admit(self: &Arc<Self>, lane: usize) -> Admission {
        let mut state = self.state.lock();
        if state.lanes[lane].waiters.is_empty() && state.can_run(self.capacity, lane) {
            state.take_slot(lane);
            return Admission::Running(self.permit(lane));
        }
        let lane_state = &state.lanes[lane];
        if lane_state.waiters.len() >= lane_state.limits.max_queue_depth {
            return Admission::QueueFull;
        }
        let arrival = state.next_arrival;
        state.next_arrival += 1;
        let waiter = Arc::new(Waiter {
            lane,
            arrival,
            granted: AtomicBool::new(false),
            notify: Notify::new(),
        });
        state.lanes[lane].waiters.push_back(Arc::clone(&waiter));
        Admission::Queued(QueuedAdmission {
            budget: Arc::clone(self),
            waiter: Some(waiter),
        })
    }

    /// Admits at once when possible; never queues (`QueueFull` stands for
    /// "would wait").
    pub(crate) fn admit_if_free(self: &Arc<Self>, lane: usize) -> Admission {
        let mut state = self.state.lock();
        if state.lanes[lane].waiters.is_empty() && state.can_run(self.capacity, lane) {
            state.take_slot(lane);
            return Admission::Running(self.permit(lane));
        }
        Admission::QueueFull
    }

    /// Withdraws a waiter that gives up. Returns its permit if a slot was
    /// already granted to it (dropping the permit gives the slot back).
    fn withdraw(self: &Arc<Self>, waiter: &Arc<Waiter>) -> Option<AdmissionPermit> {
        let mut state = self.state.lock();
        if waiter.is_granted() {
            return Some(self.permit(waiter.lane));
        }
        let queue = &mut state.lanes[waiter.lane].waiters;
        if let Some(position) = queue.iter().position(|queued| Arc::ptr_eq(queued, waiter)) {
            queue.remove(position);
        }
        // Leaving may lift a reservation's protection from other lanes.
        let woken = state.dispatch(self.capacity);
        drop(state);
        wake(woken);
        self.wake_space_watchers();
        None
    }

    fn release(&self, lane: usize) {
        let mut state = self.state.lock();
        state.running -= 1;
        state.lanes[lane].running -= 1;
        let woken = state.dispatch(self.capacity);
        drop(state);
        let handed_over = !woken.is_empty();
        wake(woken);
        if handed_over {
            self.wake_space_watchers();
        }
    }

    fn permit(self: &Arc<Self>, lane: usize) -> AdmissionPermit {
        AdmissionPermit {
            budget: Arc::clone(self),
            lane,
        }
    }

    pub(crate) fn counts(&self, lane: usize) -> LaneCounts {
        let state = self.state.lock();
        let lane_state = &state.lanes[lane];
        LaneCounts {
            global_capacity: self.capacity,
            global_running: state.running,
            lane_running: lane_state.running,
            lane_reserved: lane_state.limits.reservation,
            queued: lane_state.waiters.len(),
        }
    }
}

fn wake(woken: Vec<Arc<Waiter>>) {
    for waiter in woken {
        waiter.notify.notify_one();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn limits(ceiling: usize, reservation: usize, depth: usize) -> LaneLimits {
        LaneLimits {
            ceiling,
            reservation,
            max_queue_depth: depth,
        }
    }

    fn running(admission: Admission) -> AdmissionPermit {
        match admission {
            Admission::Running(permit) => permit,
            other => panic!("not admitted: {other:?}"),
        }
    }

    fn queued(admission: Admission) -> QueuedAdmission {
        match admission {
            Admission::Queued(waiter) => waiter,
            other => panic!("not queued: {other:?}"),
        }
    }

    fn is_granted(queued: &QueuedAdmission) -> bool {
        queued
            .waiter
            .as_ref()
            .is_some_and(|waiter| waiter.is_granted())
    }

    #[test]
    fn fifo_per_lane_and_direct_hand_off() {
        let budget = AdmissionBudget::new(1, &[limits(1, 1, 4)]);
        let first = running(budget.admit(0));
        let mut second = queued(budget.admit(0));
        let mut third = queued(budget.admit(0));
        drop(first);
        assert!(
            is_granted(&second) && !is_granted(&third),
            "one release, one grant, in order"
        );
        let second = second.try_claim().expect("granted");
        assert_eq!(budget.counts(0).global_running, 1);
        drop(second);
        assert!(is_granted(&third));
        drop(third.try_claim().expect("granted"));
        assert_eq!(budget.counts(0).global_running, 0);
    }

    #[test]
    fn a_full_queue_refuses_and_withdrawal_returns_a_granted_slot() {
        let budget = AdmissionBudget::new(1, &[limits(1, 1, 1)]);
        let held = running(budget.admit(0));
        let waiter = queued(budget.admit(0));
        assert!(matches!(budget.admit(0), Admission::QueueFull));
        drop(held);
        assert!(is_granted(&waiter));
        drop(waiter); // gives the granted slot back
        assert_eq!(budget.counts(0).global_running, 0);
        assert_eq!(budget.counts(0).queued, 0);
        // A queued waiter that leaves is removed from its queue.
        let held = running(budget.admit(0));
        drop(queued(budget.admit(0)));
        assert_eq!(budget.counts(0).queued, 0);
        drop(held);
    }

    #[test]
    fn a_lane_below_its_reservation_is_served_before_an_earlier_borrower() {
        // Capacity 2: lane 0 borrows both slots; lane 1 (reservation 1) waits
        // after a second lane-0 waiter.
        let budget = AdmissionBudget::new(2, &[limits(2, 1, 4), limits(2, 1, 4)]);
        let a = running(budget.admit(0));
        let _b = running(budget.admit(0));
        let borrower = queued(budget.admit(0));
        let reserved = queued(budget.admit(1));
        drop(a);
        assert!(
            is_granted(&reserved),
            "the lane below its reservation first"
        );
        assert!(!is_granted(&borrower));
        // While lane 1 waits below its reservation, lane 0 cannot borrow the
        // slot it protects.
        let budget = AdmissionBudget::new(3, &[limits(3, 1, 4), limits(1, 1, 4)]);
        let _x = running(budget.admit(1));
        let _y = running(budget.admit(0));
        let waiting = queued(budget.admit(1)); // lane 1 at its ceiling
        let _z = running(budget.admit(0)); // lane 1's reservation is met: no protection
        assert!(!is_granted(&waiting));
        assert_eq!(budget.counts(0).global_running, 3);
    }

    #[test]
    fn a_protected_reservation_is_not_borrowed() {
        // Capacity 3, three lanes with reservation 1. Lane 0 borrows two
        // slots, lane 1 holds one; lane 2 then waits (no free slot).
        let budget = AdmissionBudget::new(3, &[limits(3, 1, 4), limits(3, 1, 4), limits(3, 1, 4)]);
        let a = running(budget.admit(0));
        let _b = running(budget.admit(0));
        let c = running(budget.admit(1));
        let waiting = queued(budget.admit(2));
        // A release goes to lane 2 (below its reservation).
        drop(c);
        assert!(is_granted(&waiting));
        let _held = {
            let mut waiting = waiting;
            waiting.try_claim().expect("granted")
        };
        // Lane 1 now waits below its reservation after the release of a
        // lane-0 slot is taken by ... nobody: lane 0 (a borrower) cannot
        // take the slot lane 1's waiter is owed.
        let lane1 = queued(budget.admit(1));
        drop(a);
        assert!(is_granted(&lane1), "the freed slot goes to the owed lane");
        assert!(
            matches!(budget.admit(0), Admission::Queued(_)),
            "no free slot left"
        );
        // Two lanes below their reservation waiting for one slot: the
        // earlier arrival gets it (no mutual protection deadlock).
        let budget = AdmissionBudget::new(2, &[limits(2, 1, 4), limits(1, 1, 4), limits(1, 1, 4)]);
        let x = running(budget.admit(0));
        let _y = running(budget.admit(0));
        let first = queued(budget.admit(1));
        let second = queued(budget.admit(2));
        drop(x);
        assert!(is_granted(&first) && !is_granted(&second));
    }
}
