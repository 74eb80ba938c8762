//! Scenarios embedded in the binary, from the repository's `scenarios/` folder.

pub struct Builtin {
    pub name: &'static str,
    pub source: &'static str,
    /// Runs in about a second of wall time (tests run every quick one several times); the
    /// paper reproductions simulate minutes of 8 GB writes and are checked on scaled copies.
    pub quick: bool,
}

/// Every built-in scenario, by name (the file name without `.toml`).
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "demo",
        source: include_str!("../../scenarios/demo.toml"),
        quick: true,
    },
    Builtin {
        name: "bg-write-fg-read",
        source: include_str!("../../scenarios/bg-write-fg-read.toml"),
        quick: true,
    },
    Builtin {
        name: "fg-read-bg-write",
        source: include_str!("../../scenarios/fg-read-bg-write.toml"),
        quick: true,
    },
    Builtin {
        name: "production/fg-vs-bg",
        source: include_str!("../../scenarios/production/fg-vs-bg.toml"),
        quick: false,
    },
    Builtin {
        name: "production/fg-vs-bg-phones",
        source: include_str!("../../scenarios/production/fg-vs-bg-phones.toml"),
        quick: false,
    },
    Builtin {
        name: "deadlock",
        source: include_str!("../../scenarios/deadlock.toml"),
        quick: true,
    },
    Builtin {
        name: "fasttrack/gallery-backup",
        source: include_str!("../../scenarios/fasttrack/gallery-backup.toml"),
        quick: false,
    },
    Builtin {
        name: "fasttrack/gallery-update",
        source: include_str!("../../scenarios/fasttrack/gallery-update.toml"),
        quick: false,
    },
    Builtin {
        name: "fasttrack/camera-backup",
        source: include_str!("../../scenarios/fasttrack/camera-backup.toml"),
        quick: false,
    },
    Builtin {
        name: "fasttrack/camera-update",
        source: include_str!("../../scenarios/fasttrack/camera-update.toml"),
        quick: false,
    },
    Builtin {
        name: "fasttrack/game-backup",
        source: include_str!("../../scenarios/fasttrack/game-backup.toml"),
        quick: false,
    },
    Builtin {
        name: "fasttrack/game-update",
        source: include_str!("../../scenarios/fasttrack/game-update.toml"),
        quick: false,
    },
    Builtin {
        name: "context-aware/video-ioread",
        source: include_str!("../../scenarios/context-aware/video-ioread.toml"),
        quick: false,
    },
    Builtin {
        name: "joj/insert",
        source: include_str!("../../scenarios/joj/insert.toml"),
        quick: false,
    },
    Builtin {
        name: "f2fs/fg-gc-stall",
        source: include_str!("../../scenarios/f2fs/fg-gc-stall.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/inhouse",
        source: include_str!("../../scenarios/mobifs/inhouse.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/sqlite",
        source: include_str!("../../scenarios/mobifs/sqlite.toml"),
        quick: false,
    },
    Builtin {
        name: "crash/sqlite",
        source: include_str!("../../scenarios/crash/sqlite.toml"),
        quick: false,
    },
    Builtin {
        name: "crash/sqlite-wal",
        source: include_str!("../../scenarios/crash/sqlite-wal.toml"),
        quick: false,
    },
    Builtin {
        name: "crash/sqlite-delete",
        source: include_str!("../../scenarios/crash/sqlite-delete.toml"),
        quick: false,
    },
    Builtin {
        name: "crash/atomicfile",
        source: include_str!("../../scenarios/crash/atomicfile.toml"),
        quick: false,
    },
    Builtin {
        name: "crash/ordered",
        source: include_str!("../../scenarios/crash/ordered.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/antutu",
        source: include_str!("../../scenarios/mobifs/antutu.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/rl",
        source: include_str!("../../scenarios/mobifs/rl.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/browser",
        source: include_str!("../../scenarios/mobifs/browser.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/facebook",
        source: include_str!("../../scenarios/mobifs/facebook.toml"),
        quick: false,
    },
    Builtin {
        name: "mobifs/twitter",
        source: include_str!("../../scenarios/mobifs/twitter.toml"),
        quick: false,
    },
    Builtin {
        name: "sqlite/mobibench",
        source: include_str!("../../scenarios/sqlite/mobibench.toml"),
        quick: false,
    },
    Builtin {
        name: "sqlite/speedtest",
        source: include_str!("../../scenarios/sqlite/speedtest.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/m1",
        source: include_str!("../../scenarios/qasio/m1.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/m2",
        source: include_str!("../../scenarios/qasio/m2.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/m3",
        source: include_str!("../../scenarios/qasio/m3.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/m4",
        source: include_str!("../../scenarios/qasio/m4.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/m5",
        source: include_str!("../../scenarios/qasio/m5.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/m1",
        source: include_str!("../../scenarios/qasio/alone/m1.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/m2",
        source: include_str!("../../scenarios/qasio/alone/m2.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/m3",
        source: include_str!("../../scenarios/qasio/alone/m3.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/m4",
        source: include_str!("../../scenarios/qasio/alone/m4.toml"),
        quick: false,
    },
    Builtin {
        name: "io-account",
        source: include_str!("../../scenarios/io-account.toml"),
        quick: true,
    },
    Builtin {
        name: "qasio/alone/m5",
        source: include_str!("../../scenarios/qasio/alone/m5.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/bg-cost",
        source: include_str!("../../scenarios/qasio/bg-cost.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/scenario-a",
        source: include_str!("../../scenarios/qasio/scenario-a.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/scenario-b",
        source: include_str!("../../scenarios/qasio/scenario-b.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/scenario-c",
        source: include_str!("../../scenarios/qasio/scenario-c.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/scenario-a",
        source: include_str!("../../scenarios/qasio/alone/scenario-a.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/scenario-b",
        source: include_str!("../../scenarios/qasio/alone/scenario-b.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/scenario-c",
        source: include_str!("../../scenarios/qasio/alone/scenario-c.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/rlbench",
        source: include_str!("../../scenarios/qasio/rlbench.toml"),
        quick: false,
    },
    Builtin {
        name: "qasio/alone/rlbench",
        source: include_str!("../../scenarios/qasio/alone/rlbench.toml"),
        quick: false,
    },
];

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

pub fn names() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.name).collect()
}
