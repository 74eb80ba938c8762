//! Blocking primitives in virtual time: a FIFO wait queue, a mutex that knows its owner and its
//! waiters, and a one-shot completion. Each wait names its reason and blocker (see `wait.rs`).
//!
//! These are the engine's counterparts of Linux's `wait_queue_head_t` + `wait_event`, `struct
//! mutex` and `struct completion`. Simplifications: no spinning, no priority inheritance; a mutex
//! hands ownership directly to its first waiter on unlock (FIFO, like a ticket lock), so a waiter
//! never loses the lock to a task that arrives later.

use super::executor::{Sim, WakeToken};
use super::wait::{Blocker, TaskId, WaitReason};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// Bound on waiters of one primitive; more means a runaway model.
pub const MAX_WAITERS: usize = 1 << 20;

/// A FIFO wait queue. Typical use is Linux's `wait_event`: `while !condition() { wq.wait(..).await }`.
#[derive(Clone, Default)]
pub struct WaitQueue {
    waiters: Rc<RefCell<VecDeque<WakeToken>>>,
}

impl WaitQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sleeps until woken by `wake_one` or `wake_all`.
    pub fn wait(&self, sim: &Sim, reason: WaitReason, blocker: Blocker) -> WaitQueueWait {
        WaitQueueWait {
            sim: sim.clone(),
            queue: self.clone(),
            reason,
            blocker,
            holder: None,
            token: None,
        }
    }

    /// Like `wait`, naming the task that must act for the wait to end.
    pub fn wait_on_holder(
        &self,
        sim: &Sim,
        reason: WaitReason,
        blocker: Blocker,
        holder: Option<TaskId>,
    ) -> WaitQueueWait {
        let mut wait = self.wait(sim, reason, blocker);
        wait.holder = holder;
        wait
    }

    /// Wakes the longest-waiting task. Returns whether one was woken.
    pub fn wake_one(&self, sim: &Sim) -> bool {
        loop {
            let next = self.waiters.borrow_mut().pop_front();
            match next {
                None => return false,
                Some(token) => {
                    if sim.wake(token) {
                        return true;
                    }
                }
            }
        }
    }

    /// Wakes every waiting task, in arrival order. Returns how many were woken.
    pub fn wake_all(&self, sim: &Sim) -> usize {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        waiters.into_iter().filter(|token| sim.wake(*token)).count()
    }

    pub fn len(&self) -> usize {
        self.waiters.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.borrow().is_empty()
    }
}

/// The future returned by [`WaitQueue::wait`].
pub struct WaitQueueWait {
    sim: Sim,
    queue: WaitQueue,
    reason: WaitReason,
    blocker: Blocker,
    holder: Option<TaskId>,
    token: Option<WakeToken>,
}

impl Future for WaitQueueWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        match self.token {
            Some(token) if self.sim.was_woken(token) => Poll::Ready(()),
            Some(_) => Poll::Pending,
            None => {
                let token = self
                    .sim
                    .block_current(self.reason, self.blocker, self.holder);
                let mut waiters = self.queue.waiters.borrow_mut();
                assert!(waiters.len() < MAX_WAITERS, "wait queue limit exceeded");
                waiters.push_back(token);
                drop(waiters);
                self.token = Some(token);
                Poll::Pending
            }
        }
    }
}

struct MutexState {
    id: u32,
    reason: WaitReason,
    owner: Option<TaskId>,
    waiters: VecDeque<WakeToken>,
    /// How many of the first `waiters` are urgent ([`Mutex::lock_urgent`]): they are kept ahead
    /// of the others.
    urgent: usize,
}

/// A sleeping lock that records its owner, so a waiter's chain can name who holds it.
#[derive(Clone)]
pub struct Mutex {
    state: Rc<RefCell<MutexState>>,
}

impl Mutex {
    /// A mutex called `name` whose waits are accounted under `reason` (e.g. `InodeLock`).
    pub fn new(sim: &Sim, name: &str, reason: WaitReason) -> Self {
        Mutex {
            state: Rc::new(RefCell::new(MutexState {
                id: sim.new_lock_id(name),
                reason,
                owner: None,
                waiters: VecDeque::new(),
                urgent: 0,
            })),
        }
    }

    pub fn id(&self) -> u32 {
        self.state.borrow().id
    }

    pub fn owner(&self) -> Option<TaskId> {
        self.state.borrow().owner
    }

    pub fn waiters(&self) -> usize {
        self.state.borrow().waiters.len()
    }

    /// Takes the lock, sleeping while another task holds it.
    pub fn lock(&self, sim: &Sim) -> MutexLock {
        MutexLock {
            sim: sim.clone(),
            mutex: self.clone(),
            token: None,
            urgent: false,
        }
    }

    /// Like [`Mutex::lock`], but the waiter goes ahead of every waiter that is not urgent
    /// (behind earlier urgent ones): FastTrack §4.2's "FG waiters served first regardless of
    /// their arrival".
    pub fn lock_urgent(&self, sim: &Sim) -> MutexLock {
        MutexLock {
            urgent: true,
            ..self.lock(sim)
        }
    }

    /// Urgent waiters now (a holder that yields to them checks this at its segment's end).
    pub fn urgent_waiters(&self) -> usize {
        self.state.borrow().urgent
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self, sim: &Sim) -> Option<MutexGuard> {
        let me = sim.current_task().expect("try_lock outside a task");
        let mut state = self.state.borrow_mut();
        if state.owner.is_some() {
            return None;
        }
        state.owner = Some(me);
        Some(MutexGuard {
            sim: sim.clone(),
            mutex: self.clone(),
        })
    }

    fn unlock(&self, sim: &Sim) {
        let mut state = self.state.borrow_mut();
        assert!(state.owner.is_some(), "unlock of a free mutex");
        // Hand the lock to the first waiter whose wait is still current.
        while let Some(token) = state.waiters.pop_front() {
            state.urgent = state.urgent.saturating_sub(1);
            state.owner = Some(token.task);
            drop(state);
            if sim.wake(token) {
                return;
            }
            state = self.state.borrow_mut();
        }
        state.owner = None;
    }
}

/// The future returned by [`Mutex::lock`].
pub struct MutexLock {
    sim: Sim,
    mutex: Mutex,
    token: Option<WakeToken>,
    urgent: bool,
}

impl Future for MutexLock {
    type Output = MutexGuard;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<MutexGuard> {
        let me = self.sim.current_task().expect("lock outside a task");
        let guard = || MutexGuard {
            sim: self.sim.clone(),
            mutex: self.mutex.clone(),
        };
        match self.token {
            Some(token) => {
                if self.sim.was_woken(token) {
                    assert_eq!(self.mutex.owner(), Some(me), "woken without the lock");
                    Poll::Ready(guard())
                } else {
                    Poll::Pending
                }
            }
            None => {
                let mut state = self.mutex.state.borrow_mut();
                match state.owner {
                    None => {
                        state.owner = Some(me);
                        drop(state);
                        Poll::Ready(guard())
                    }
                    Some(owner) => {
                        assert_ne!(owner, me, "task {me} locks a mutex it already holds");
                        let (id, reason) = (state.id, state.reason);
                        drop(state);
                        let token = self
                            .sim
                            .block_current(reason, Blocker::Lock(id), Some(owner));
                        let mut state = self.mutex.state.borrow_mut();
                        assert!(state.waiters.len() < MAX_WAITERS, "mutex waiter limit");
                        if self.urgent {
                            let at = state.urgent;
                            state.waiters.insert(at, token);
                            state.urgent += 1;
                        } else {
                            state.waiters.push_back(token);
                        }
                        drop(state);
                        self.token = Some(token);
                        Poll::Pending
                    }
                }
            }
        }
    }
}

/// Holds a [`Mutex`]; dropping it unlocks.
pub struct MutexGuard {
    sim: Sim,
    mutex: Mutex,
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        self.mutex.unlock(&self.sim);
    }
}

struct CompletionState<T> {
    value: Option<T>,
    /// The first waiter, inline: a completion nearly always has exactly one (a bio's
    /// submitter), and a vector would allocate for it.
    first_waiter: Option<WakeToken>,
    /// The waiters after the first, in the order they came.
    more_waiters: Vec<WakeToken>,
}

/// A one-shot event carrying a value (`struct completion` with a payload).
pub struct Completion<T> {
    state: Rc<RefCell<CompletionState<T>>>,
}

impl<T> Clone for Completion<T> {
    fn clone(&self) -> Self {
        Completion {
            state: self.state.clone(),
        }
    }
}

impl<T> Default for Completion<T> {
    fn default() -> Self {
        Completion {
            state: Rc::new(RefCell::new(CompletionState {
                value: None,
                first_waiter: None,
                more_waiters: Vec::new(),
            })),
        }
    }
}

impl<T> Completion<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Completes with `value` and wakes every waiter. Completing twice is a bug.
    pub fn complete(&self, sim: &Sim, value: T) {
        let (first, more) = {
            let mut state = self.state.borrow_mut();
            assert!(state.value.is_none(), "completion completed twice");
            state.value = Some(value);
            (
                state.first_waiter.take(),
                std::mem::take(&mut state.more_waiters),
            )
        };
        // In the order they came: the first, then the others.
        for token in first.into_iter().chain(more) {
            sim.wake(token);
        }
    }

    pub fn is_done(&self) -> bool {
        self.state.borrow().value.is_some()
    }

    /// Makes this completion new again (not done, no waiters) if nothing else holds it, so
    /// that a caller that hands out many short-lived completions can reuse their allocations;
    /// false (and unchanged) if another clone is alive.
    pub fn recycle(&mut self) -> bool {
        let Some(state) = Rc::get_mut(&mut self.state) else {
            return false;
        };
        let state = state.get_mut();
        assert!(
            state.first_waiter.is_none() && state.more_waiters.is_empty(),
            "a completion nobody else holds has no waiters"
        );
        state.value = None;
        true
    }
}

impl<T: Clone> Completion<T> {
    pub fn peek(&self) -> Option<T> {
        self.state.borrow().value.clone()
    }

    /// Waits until completed and returns a copy of the value.
    pub fn wait(&self, sim: &Sim, reason: WaitReason, blocker: Blocker) -> CompletionWait<T> {
        self.wait_with_holder(sim, reason, blocker, None)
    }

    pub fn wait_with_holder(
        &self,
        sim: &Sim,
        reason: WaitReason,
        blocker: Blocker,
        holder: Option<TaskId>,
    ) -> CompletionWait<T> {
        CompletionWait {
            sim: sim.clone(),
            completion: self.clone(),
            reason,
            blocker,
            holder,
            registered: false,
        }
    }
}

/// The future returned by [`Completion::wait`].
pub struct CompletionWait<T> {
    sim: Sim,
    completion: Completion<T>,
    reason: WaitReason,
    blocker: Blocker,
    holder: Option<TaskId>,
    registered: bool,
}

impl<T: Clone> Future for CompletionWait<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<T> {
        if let Some(value) = self.completion.peek() {
            return Poll::Ready(value);
        }
        assert!(
            !self.registered,
            "completion waiter polled before completion"
        );
        let token = self
            .sim
            .block_current(self.reason, self.blocker, self.holder);
        let mut state = self.completion.state.borrow_mut();
        if state.first_waiter.is_none() {
            assert!(state.more_waiters.is_empty(), "waiters without a first");
            state.first_waiter = Some(token);
        } else {
            assert!(
                state.more_waiters.len() < MAX_WAITERS,
                "completion waiter limit"
            );
            state.more_waiters.push(token);
        }
        drop(state);
        self.registered = true;
        Poll::Pending
    }
}
