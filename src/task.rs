//! What the kernel knows of tasks beyond their identity: which app is in the foreground.
//!
//! Linux keeps this as task state the lower layers read, not as a call into the app layer:
//! Android's ActivityManager moves the top app's tasks into the `top-app` cgroup (task profiles),
//! and FastTrack's app status detector (§4.1) sends the UID of the top activity down to the
//! kernel. [`ForegroundState`] is that kernel-side copy: the page cache, the block layer and the
//! device read it; the app layer (`crate::app`) and the scenario timeline write it.
//!
//! Simplifications: one foreground UID (no split screen, no `foreground` vs `top-app` groups
//! yet); no per-thread state, the UID stands for every task of the app.

use std::cell::Cell;

/// Which app is in the foreground: the UID of the top activity.
#[derive(Debug, Default)]
pub struct ForegroundState {
    foreground_uid: Cell<Option<u32>>,
    switches: Cell<u64>,
}

impl ForegroundState {
    pub fn new(foreground_uid: Option<u32>) -> Self {
        ForegroundState {
            foreground_uid: Cell::new(foreground_uid),
            switches: Cell::new(0),
        }
    }

    pub fn foreground_uid(&self) -> Option<u32> {
        self.foreground_uid.get()
    }

    pub fn is_foreground(&self, uid: u32) -> bool {
        self.foreground_uid.get() == Some(uid)
    }

    /// Brings `uid` to the top of the activity stack.
    pub fn set_foreground(&self, uid: u32) {
        if self.foreground_uid.get() != Some(uid) {
            self.foreground_uid.set(Some(uid));
            self.switches.set(self.switches.get() + 1);
        }
    }

    /// Foreground changes so far.
    pub fn switches(&self) -> u64 {
        self.switches.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_is_counted_only_when_the_foreground_changes() {
        let state = ForegroundState::new(Some(10_000));
        assert!(state.is_foreground(10_000));
        state.set_foreground(10_000);
        assert_eq!(state.switches(), 0);
        state.set_foreground(10_001);
        assert!(state.is_foreground(10_001) && !state.is_foreground(10_000));
        assert_eq!(
            (state.switches(), state.foreground_uid()),
            (1, Some(10_001))
        );
    }
}
