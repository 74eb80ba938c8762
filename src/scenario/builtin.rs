//! Scenarios embedded in the binary, from the repository's `scenarios/` folder.

pub struct Builtin {
    pub name: &'static str,
    pub source: &'static str,
}

/// Every built-in scenario, by name (the file name without `.toml`).
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "demo",
        source: include_str!("../../scenarios/demo.toml"),
    },
    Builtin {
        name: "bg-write-fg-read",
        source: include_str!("../../scenarios/bg-write-fg-read.toml"),
    },
    Builtin {
        name: "fg-read-bg-write",
        source: include_str!("../../scenarios/fg-read-bg-write.toml"),
    },
    Builtin {
        name: "production/fg-vs-bg",
        source: include_str!("../../scenarios/production/fg-vs-bg.toml"),
    },
    Builtin {
        name: "deadlock",
        source: include_str!("../../scenarios/deadlock.toml"),
    },
];

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

pub fn names() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.name).collect()
}
