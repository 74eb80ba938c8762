//! `mobistack::fuzzing`'s `replay_run`: parses AND runs the input under the harness's budget. A
//! panic, a hang (past the event bound) or a deadlock/livelock finding is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(Err(mobistack::fuzzing::Error::Finding(message))) =
        mobistack::fuzzing::run_target("replay_run", data)
    {
        panic!("{message}");
    }
});
