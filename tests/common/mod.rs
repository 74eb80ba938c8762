//! What the integration tests that run the built binary share.

use std::process::Command;

/// Runs the `mobistack` binary with `args`: (exit status, stdout, stderr).
pub fn mobistack(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
