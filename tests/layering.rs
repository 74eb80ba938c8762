//! The stack's layering (DESIGN.md, "Layering"): layers import downward only. Apps and
//! workloads -> fs -> mm -> block -> dev, all on the engine (`sim`) and the shared vocabulary
//! (`units`, `errno`, `task`, `kernel`, and `fasttrack`: FastTrack's switches and the app status
//! detector's rules, which every layer's FastTrack module reads). This test reads the sources and fails on an upward import in
//! non-test code, naming the file and line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The modules each layer may name as `crate::<module>` outside its tests.
const ALLOWED: &[(&str, &[&str])] = &[
    ("units.rs", &[]),
    ("errno.rs", &[]),
    ("fasttrack.rs", &[]),
    ("task.rs", &["fasttrack"]),
    ("kernel.rs", &["units", "sim"]),
    ("sim", &["units"]),
    ("dev", &["units"]),
    (
        "block",
        &["dev", "sim", "units", "task", "kernel", "fasttrack"],
    ),
    (
        "mm",
        &[
            "block",
            "dev",
            "sim",
            "units",
            "errno",
            "task",
            "kernel",
            "fasttrack",
        ],
    ),
    (
        "fs",
        &[
            "mm",
            "block",
            "dev",
            "sim",
            "units",
            "errno",
            "task",
            "kernel",
            "fasttrack",
        ],
    ),
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .expect("readable source directory")
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            rust_files(&entry, out);
        } else if entry.extension().is_some_and(|e| e == "rs") {
            out.push(entry);
        }
    }
}

/// `crate::<module>` names used on the non-comment lines of `text` before its test module,
/// with their line numbers.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((number, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|(_, next)| next.trim_start().starts_with("mod "))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let name: String = rest[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((number + 1, name));
            rest = &rest[at + 7..];
        }
    }
    found
}

#[test]
fn layers_import_downward_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (layer, allowed) in ALLOWED {
        let allowed: BTreeSet<&str> = allowed.iter().copied().collect();
        let own = layer.trim_end_matches(".rs");
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "layer {layer} has no sources");
        for file in files {
            // Test modules in files of their own (`tests.rs`, `ops_tests.rs`, `test_support.rs`)
            // assemble stacks from any layer.
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with("tests.rs") || name == "test_support.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            for (line, module) in imports(&text) {
                if module != own && !allowed.contains(module.as_str()) {
                    violations.push(format!(
                        "{}:{line}: layer `{own}` imports `crate::{module}`",
                        file.strip_prefix(&src).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "upward imports:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scan_sees_imports_and_skips_comments_and_tests() {
    let text = "use crate::mm::Page;\n// crate::app in a comment\nfn f() { crate::sim::x(); }\n#[cfg(test)]\nmod tests { use crate::app::X; }\n";
    let names: Vec<String> = imports(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, vec!["mm".to_string(), "sim".to_string()]);
}
