//! The scenario parser on arbitrary text: it returns a scenario or an error, never panics, and
//! every error that points into the file points at a line that exists.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = mobistack::scenario::parse("fuzz.toml", text) {
        if let Some((line, column)) = error.position {
            assert!(line >= 1 && column >= 1, "{error}");
            assert!(line <= text.lines().count().max(1) + 1, "{error}");
        }
        let shown = error.to_string();
        assert!(shown.len() < 4096, "a {}-byte error", shown.len());
    }
});
