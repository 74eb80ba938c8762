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

/// A test's temporary directory, removed when the guard is dropped (also when the test fails:
/// the drop runs while unwinding).
#[allow(dead_code)] // not every test binary that includes this module writes files
pub struct TestDir(pub std::path::PathBuf);

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `text` to `file` in a fresh directory of its own, `mobistack-<what>-<pid>-<name>` in
/// the temporary directory; returns the directory's guard (keep it alive for the test) and the
/// file's path.
#[allow(dead_code)] // not every test binary that includes this module writes files
pub fn temp_file(what: &str, name: &str, file: &str, text: &str) -> (TestDir, String) {
    let dir = std::env::temp_dir().join(format!("mobistack-{what}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    (TestDir(dir), path.display().to_string())
}
