//! The toy server: one queue, one server, a fixed service time per request. It stands in for the
//! block layer and device until those land, and shows the two orders the papers argue about:
//! `fifo` (arrival order) and `fg-first` (the foreground app's requests before the others, FIFO
//! within each class, chosen at dispatch time from the activity manager, as FastTrack's I/O
//! dispatcher does).

use crate::scenario::{ToyPolicy, ToyServerConfig};
use crate::sim::sync::{Completion, WaitQueue};
use crate::sim::{Blocker, Sim, WaitReason};
use crate::task::ForegroundState;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// Bound on queued requests.
pub const MAX_QUEUED: usize = 1 << 20;

struct Queued {
    id: u64,
    uid: u32,
    done: Completion<()>,
}

pub struct ToyServer {
    config: ToyServerConfig,
    activity: Rc<ForegroundState>,
    queue: RefCell<VecDeque<Queued>>,
    arrivals: WaitQueue,
    next_id: Cell<u64>,
    served: Cell<u64>,
}

impl ToyServer {
    /// Creates the server and starts its serving daemon.
    pub fn start(sim: &Sim, config: ToyServerConfig, activity: Rc<ForegroundState>) -> Rc<Self> {
        let server = Rc::new(ToyServer {
            config,
            activity,
            queue: RefCell::new(VecDeque::new()),
            arrivals: WaitQueue::new(),
            next_id: Cell::new(1),
            served: Cell::new(0),
        });
        let (s, daemon) = (sim.clone(), server.clone());
        sim.spawn_daemon("toy-server", async move { daemon.serve(&s).await });
        server
    }

    /// Sends one request from `uid` and waits until it has been served.
    pub async fn submit(&self, sim: &Sim, uid: u32) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let done = Completion::new();
        {
            let mut queue = self.queue.borrow_mut();
            assert!(queue.len() < MAX_QUEUED, "toy server queue limit exceeded");
            queue.push_back(Queued {
                id,
                uid,
                done: done.clone(),
            });
        }
        self.arrivals.wake_one(sim);
        done.wait(sim, WaitReason::Device, Blocker::Request(id))
            .await;
    }

    pub fn served(&self) -> u64 {
        self.served.get()
    }

    fn pick(&self) -> Option<Queued> {
        let mut queue = self.queue.borrow_mut();
        let position = match self.config.policy {
            ToyPolicy::Fifo => 0,
            ToyPolicy::FgFirst => queue
                .iter()
                .position(|q| self.activity.is_foreground(q.uid))
                .unwrap_or(0),
        };
        queue.remove(position)
    }

    async fn serve(&self, sim: &Sim) {
        loop {
            let Some(request) = self.pick() else {
                self.arrivals
                    .wait(sim, WaitReason::WaitQueue, Blocker::None)
                    .await;
                continue;
            };
            sim.sleep(self.config.service_time).await;
            self.served.set(self.served.get() + 1);
            debug_assert!(request.id > 0);
            request.done.complete(sim, ());
        }
    }
}
