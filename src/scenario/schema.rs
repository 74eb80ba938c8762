//! The scenario schema (serde types) and its validation.

use super::locate::{key, Seg, Spans};
use super::ScenarioError;
use crate::units::serde_units;
use crate::units::Nanos;
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Seeds to run; each variant runs once per seed.
    /// Default: one run with seed 1.
    #[serde(default)]
    pub seeds: Option<Spanned<Vec<u64>>>,
    /// Virtual time to simulate. Required unless `end = "apps-done"`.
    #[serde(default, with = "optional_duration")]
    pub duration: Option<Nanos>,
    #[serde(default)]
    pub end: Option<Spanned<EndCondition>>,
    #[serde(default)]
    pub stack: StackConfig,
    #[serde(default, rename = "app")]
    pub apps: Vec<AppConfig>,
    #[serde(default)]
    pub timeline: Vec<Spanned<TimelineEntry>>,
    #[serde(default, rename = "variant")]
    pub variants: Vec<VariantEntry>,
}

/// When a run ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndCondition {
    /// At `duration` of virtual time.
    #[default]
    Duration,
    /// When every app's workload has finished (bounded by `duration` if one is given).
    AppsDone,
}

/// The configuration of the simulated stack: what variants override.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StackConfig {
    /// A phone preset (`phone = "nexus-6"`; [`super::phones`]): the device, RAM, cores, tick,
    /// elevator and writeback settings of that phone, under the scenario's own values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    /// The storage device (`[stack.device]`; see `docs/devices.md`).
    #[serde(default)]
    pub device: crate::dev::DeviceConfig,
    /// The block layer (`[stack.block]`).
    #[serde(default)]
    pub block: crate::block::BlockConfig,
    /// Memory and writeback knobs (`[stack.vm]`; see `docs/mm.md`).
    #[serde(default)]
    pub vm: crate::mm::VmConfig,
    /// The kernel build: `hz` (`[stack.kernel]`).
    #[serde(default)]
    pub kernel: crate::kernel::KernelConfig,
    /// The CPU: cores and the cost of syscalls, copies and page allocation (`[stack.cpu]`).
    #[serde(default)]
    pub cpu: crate::kernel::CpuConfig,
    /// QASIO's boosting of quasi-asynchronous I/O (`[stack.qasio]`; seed 000).
    #[serde(default)]
    pub qasio: crate::block::qasio::QasioConfig,
    /// FastTrack's modules (`[stack.fasttrack]`; seed 001): `pa`, `pr`, `id`.
    #[serde(default)]
    pub fasttrack: crate::fasttrack::FastTrackConfig,
    /// The file system and its mount options (`[stack.fs]`; see `docs/ext4.md`).
    #[serde(default)]
    pub fs: crate::fs::ext4::Ext4Config,
    /// MobiFS over ext4 (`[stack.mobifs]`; seed 004, `docs/mobifs.md`).
    #[serde(default)]
    pub mobifs: crate::fs::mobifs::MobiFsConfig,
    /// The phone's user: touch events in short and long interval regimes (`[stack.user]`;
    /// `crate::app::user`), which MobiFS's idle policy watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<crate::app::user::UserModelConfig>,
    /// The toy I/O server of the foundation stack.
    #[serde(default)]
    pub toy: ToyServerConfig,
    /// Where apps' processes go in the block cgroups: `"none"` (the root, unless an app names
    /// its cgroup) or `"android"` (the task profiles; see `crate::task`).
    #[serde(default)]
    pub io_policy: crate::task::IoPolicy,
    /// Cgroups and their I/O files (`[stack.cgroup.<name>]`, `root` for the root).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cgroup: std::collections::BTreeMap<String, crate::task::CgroupConfig>,
}

impl StackConfig {
    /// `[stack.mobifs]`: its own fields, and a file system it can run over.
    fn mobifs_check(&self) -> Result<(), String> {
        self.mobifs.validate()?;
        if self.mobifs.enabled && self.mobifs.memory_limit > self.vm.ram / 2 {
            // Pinned pages cannot be reclaimed: a limit near the RAM would leave page
            // allocation nothing to reclaim.
            return Err(format!(
                "`memory-limit` {} bytes must be at most half the RAM ([stack.vm] ram = {} bytes)",
                self.mobifs.memory_limit, self.vm.ram
            ));
        }
        if self.mobifs.enabled
            && self.mobifs.policy == crate::fs::mobifs::CheckpointPolicy::Idle
            && self.user.is_none()
        {
            return Err(
                "`policy` = \"idle\" needs a user to watch: add [stack.user] (the user model)"
                    .into(),
            );
        }
        if self.mobifs.enabled && self.fs.kind != crate::fs::ext4::FsKind::Ext4 {
            return Err(format!(
                "`enabled`: MobiFS checkpoints through ext4's journal; [stack.fs] type is {:?}",
                self.fs.kind
            )
            .to_lowercase());
        }
        Ok(())
    }

    /// Checks what the schema cannot: names of profiles, policies and elevators.
    pub fn validate(&self) -> Result<(), String> {
        for (_, result) in self.check_tables() {
            result?;
        }
        crate::task::TaskTable::new().configure_cgroups(self.io_policy, &self.cgroup, None)?;
        Ok(())
    }

    /// The checks of [`StackConfig::validate`], table by table (`device`, `block`, `kernel`,
    /// `cpu`, `vm`, `fs`, `qasio`, `mobifs`, `user`), so that an error can be pointed at its table's field.
    pub fn check_tables(&self) -> [(&'static str, Result<(), String>); 9] {
        let device = self.device.resolve().map(|_| ()).and_then(|()| {
            if (0.0..=1.0).contains(&self.device.fill) {
                Ok(())
            } else {
                Err(format!(
                    "`fill` {} must be a fraction between 0 and 1 (e.g. 0.5)",
                    self.device.fill
                ))
            }
        });
        // `VmConfig::validate` checks both ratios in one message; name the one that is wrong.
        let vm = if self.vm.dirty_ratio == 0 || self.vm.dirty_ratio > 100 {
            Err(format!(
                "`dirty_ratio` {} must be a percentage from 1 to 100 (Linux: 20)",
                self.vm.dirty_ratio
            ))
        } else if self.vm.dirty_background_ratio > 100 {
            Err(format!(
                "`dirty_background_ratio` {} must be a percentage from 0 to 100 (Linux: 10)",
                self.vm.dirty_background_ratio
            ))
        } else {
            self.vm.validate()
        };
        [
            ("device", device),
            ("block", self.block.validate()),
            ("kernel", self.kernel.validate()),
            ("cpu", self.cpu.validate()),
            ("vm", vm),
            (
                "fs",
                self.fs
                    .validate()
                    .and_then(|()| self.fs.check_kernel(self.kernel.version)),
            ),
            ("qasio", self.qasio.validate()),
            ("mobifs", self.mobifs_check()),
            ("user", self.user.as_ref().map_or(Ok(()), |u| u.validate())),
        ]
    }
}

impl StackConfig {
    /// What a scenario may not ask of its kernel's era, table by table (the block layer's
    /// elevator and wbt: [`crate::block::BlockConfig::check_era`]). Checked when a scenario is
    /// parsed, not by [`StackConfig::validate`]: stacks built in code (`mobistack fio
    /// --elevator`, the reproductions' variants) may mix eras, and their results say so
    /// ([`super::eras::mixed_eras`]).
    pub fn check_eras(&self) -> [(&'static str, Result<(), String>); 1] {
        [("block", self.block.check_era(&self.kernel))]
    }

    /// Checks that every app's `cgroup` exists in this stack's cgroups.
    pub fn check_app_cgroups(&self, apps: &[AppConfig]) -> Result<(), String> {
        let tasks = crate::task::TaskTable::new();
        tasks.configure_cgroups(self.io_policy, &self.cgroup, None)?;
        for app in apps {
            if let Some(cgroup) = &app.cgroup {
                tasks
                    .set_app_cgroup(0, cgroup)
                    .map_err(|m| format!("app `{}`: {m}", app.name.get_ref()))?;
            }
        }
        Ok(())
    }
}

/// Service order of the toy server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToyPolicy {
    /// First come, first served.
    #[default]
    Fifo,
    /// Requests of the foreground app before any other, FIFO within each class.
    FgFirst,
}

/// A single-queue server with a fixed service time per request: the stand-in device of the
/// foundation stack, replaced by the real block layer and devices.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToyServerConfig {
    #[serde(default)]
    pub policy: ToyPolicy,
    /// Time to serve one request, whatever its size.
    #[serde(default = "default_toy_service_time", with = "serde_units::duration")]
    pub service_time: Nanos,
}

/// 1 ms per request: about an eMMC 4 KiB random write (2,000 IOPS at QD1 would be 0.5 ms;
/// docs/references.md, eMMC 4.5) - a round number for a toy, not a calibrated device.
fn default_toy_service_time() -> Nanos {
    crate::units::NS_PER_MS
}

impl Default for ToyServerConfig {
    fn default() -> Self {
        ToyServerConfig {
            policy: ToyPolicy::default(),
            service_time: default_toy_service_time(),
        }
    }
}

/// How an app behaves towards the user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The app on screen (top of the activity stack) at the start.
    Foreground,
    /// An app not on screen.
    #[default]
    Background,
    /// A service with no activity (never foreground).
    Service,
}

/// One app of the scenario.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    pub name: Spanned<String>,
    /// Linux UID; default 10000 + the app's position (Android's first app UID is 10000).
    #[serde(default)]
    pub uid: Option<u32>,
    #[serde(default)]
    pub role: Role,
    /// When the app starts; default at time zero.
    #[serde(default, with = "serde_units::duration")]
    pub start: Nanos,
    /// CPU nice value of the app's processes, -20..=19; default 0. Android runs background
    /// worker threads at nice 10 (`THREAD_PRIORITY_BACKGROUND`), which CFQ serves at best
    /// effort level 6 (`task_nice_ioprio`).
    #[serde(default)]
    pub nice: i8,
    /// I/O priority the app's processes set when they start (`ioprio_set`): `"rt:N"`, `"be:N"`
    /// (N 0..=7), `"idle"`; default none (class NONE: derived from `nice`).
    #[serde(default)]
    pub ioprio: Option<String>,
    /// The cgroup the app's processes are in (`root` or a `[stack.cgroup.<name>]`); default: the
    /// root, or where `[stack] io_policy` puts it.
    #[serde(default)]
    pub cgroup: Option<String>,
    /// Seed 003's class of the app for the `subregion` scheduler's bandwidth reservation:
    /// `"plain"` (default), `"time-sensitive"` (a video player), `"bursty"` (a download
    /// manager).
    #[serde(default)]
    pub io_class: crate::task::AppIoClass,
    pub workload: WorkloadConfig,
}

/// What an app does. Each workload kind is a table named after it, e.g. `[app.workload.toy-io]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum WorkloadConfig {
    /// Synthetic requests to the toy server.
    ToyIo(crate::workload::toy::ToyIoConfig),
    /// Takes named locks in order (exercises lock chains and deadlock reports).
    ToyLocks(crate::workload::toy::ToyLocksConfig),
    /// One fio job (fio's option names) against the block device.
    Fio(crate::workload::fio::FioWorkloadConfig),
    /// Writes a file sequentially (a download, a backup): buffered, O_SYNC or O_DIRECT.
    SeqWrite(crate::workload::file::SeqWriteConfig),
    /// Reads a file sequentially or at random offsets (a gallery, a game loading assets).
    FileRead(crate::workload::file::FileReadConfig),
    /// Small writes each followed by fsync or fdatasync (a database commit, a messenger).
    FsyncWrite(crate::workload::file::FsyncWriteConfig),
    /// A video player's periodic frame reads, late frames counted (seed 003 §7.2).
    Video(crate::workload::file::VideoConfig),
    /// A loop of system calls written step by step (QASIO's microbenchmarks, app launches).
    Ops(crate::workload::ops::OpsConfig),
    /// A filebench `.f` script (its threads are the app's tasks).
    Filebench(crate::workload::filebench::FilebenchConfig),
    /// A block trace replayed through the block layer (each trace process a process of the app).
    Replay(crate::workload::replay::ReplayConfig),
    /// SQL through the real SQLite library (statements, Mobibench, the RL benchmark, a log).
    Sqlite(crate::workload::sqlite::SqliteConfig),
}

/// A timeline entry as written: `{ at = "5s", foreground = "camera" }`, with exactly one action.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineEntry {
    #[serde(with = "serde_units::duration")]
    pub at: Nanos,
    /// Bring this app to the foreground (the previous foreground app goes to the background).
    #[serde(default)]
    pub foreground: Option<Spanned<String>>,
    /// Start this app's workload (if it was not started yet).
    #[serde(default)]
    pub start: Option<Spanned<String>>,
    /// Stop this app's workload.
    #[serde(default)]
    pub stop: Option<Spanned<String>>,
}

/// A named override of the stack configuration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantEntry {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: String,
    /// Validated here for field names and units; merged over the base stack field by field.
    #[serde(default)]
    pub stack: StackConfig,
}

/// A timeline action after validation, naming apps by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimelineAction {
    Foreground(usize),
    Start(usize),
    Stop(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimelineEvent {
    pub at: Nanos,
    pub action: TimelineAction,
}

/// A variant after merging: its name and its complete stack configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    pub name: String,
    pub description: String,
    pub stack: StackConfig,
    /// Which of the stack's fields the scenario and the phone preset set (the rest are the
    /// era's or the model's defaults): what `mobistack validate` reports for each era switch.
    #[serde(skip)]
    pub provenance: super::eras::Provenance,
}

/// A validated scenario, ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: String,
    pub name: String,
    pub description: String,
    pub seeds: Vec<u64>,
    /// Virtual-time limit of each run.
    pub duration: Nanos,
    pub end: EndCondition,
    pub apps: Vec<AppConfig>,
    /// Sorted by time, stable for equal times.
    pub timeline: Vec<TimelineEvent>,
    /// At least one: the base stack alone is variant "base" when the file names none.
    pub variants: Vec<Variant>,
}

/// Bound on apps in one scenario (Android keeps far fewer processes cached).
pub const MAX_APPS: usize = 256;
/// Bound on the tasks a scenario's workloads start (toy-io streams, fio submitters): 2^18,
/// a quarter of the engine's task limit, leaving room for the kernel's.
pub const MAX_WORKLOAD_TASKS: u64 = 1 << 18;
/// Bound on variants x seeds of one scenario: 1,000 runs. A paper-sized run takes seconds to
/// a minute of wall time and holds its own stack (device map, page cache) in memory per worker
/// thread; a thousand is an afternoon's sweep. Larger sweeps are split into several scenarios.
pub const MAX_RUNS: usize = 1_000;
/// Without a duration, an `apps-done` run still stops here: one hour of virtual time.
pub const DEFAULT_RUN_LIMIT: Nanos = 3_600 * crate::units::NS_PER_SEC;

/// Deep merge: tables merge key by key, any other value replaces.
/// The stack table with its phone preset (if it names one) underneath.
fn with_phone(stack: toml::Table) -> Result<toml::Table, String> {
    match stack.get("phone").and_then(|v| v.as_str()) {
        Some(name) => {
            let mut preset = super::phones::preset(name)?;
            merge_tables(&mut preset, &stack);
            Ok(super::eras::with_era_defaults(preset))
        }
        None => Ok(super::eras::with_era_defaults(stack)),
    }
}

fn merge_tables(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge_tables(base_table, over_table)
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

impl Scenario {
    pub(super) fn from_file(
        file: &str,
        source: &str,
        spans: &Spans<'_>,
        document: ScenarioFile,
        raw: &toml::Table,
    ) -> Result<Scenario, ScenarioError> {
        let error = |span: std::ops::Range<usize>, message: String| {
            ScenarioError::at(file, source, Some(span), message)
        };
        let whole = |message: String| ScenarioError::at(file, source, None, message);
        let line_of = |span: std::ops::Range<usize>| super::line_column(source, span.start).0;
        // An error at the value of a top-level field (or the whole file if it is absent).
        let at_field = |name: &str, message: String| {
            ScenarioError::at(file, source, spans.value_span(&[key(name)]), message)
        };
        // A check's message pointed at the field it names among `tables` (searched in order),
        // else at `fallback`; other fields it names get their lines. `prefix` (which variant and
        // table) is shown first but not searched: a variant's name is no field.
        let blame = |prefix: String,
                     message: String,
                     tables: &[Vec<Seg>],
                     fallback: std::ops::Range<usize>| {
            let found = spans.blame(&message, tables);
            let message = prefix + &message;
            match found {
                Some(found) => {
                    let mut message = message;
                    for (name, span) in &found.related {
                        if line_of(span.clone()) != line_of(found.span.clone()) {
                            message.push_str(&format!(
                                " (`{name}` is at line {})",
                                line_of(span.clone())
                            ));
                        }
                    }
                    error(found.span, message)
                }
                None => error(fallback, message),
            }
        };

        if document.name.trim().is_empty() {
            return Err(at_field(
                "name",
                "field `name` must not be empty: name the scenario, e.g. name = \"my-test\"".into(),
            ));
        }
        let seeds = match document.seeds {
            None => vec![1],
            Some(seeds) if seeds.get_ref().is_empty() => {
                return Err(error(
                    seeds.span(),
                    "field `seeds` must list at least one seed".into(),
                ))
            }
            Some(seeds) => seeds.into_inner(),
        };
        let end_span = document.end.as_ref().map(|e| e.span());
        let end = document.end.map(|e| e.into_inner()).unwrap_or_default();
        let duration = match (document.duration, end) {
            (Some(0), _) => {
                return Err(at_field(
                    "duration",
                    "field `duration` must be positive, e.g. duration = \"10s\"".into(),
                ))
            }
            (Some(d), _) => d,
            (None, EndCondition::AppsDone) => DEFAULT_RUN_LIMIT,
            (None, EndCondition::Duration) => {
                return Err(ScenarioError::at(
                    file,
                    source,
                    end_span,
                    "field `duration` is required (or set `end = \"apps-done\"`)".into(),
                ))
            }
        };

        if document.apps.len() > MAX_APPS {
            let span = spans
                .value_span(&[key("app"), Seg::Index(MAX_APPS)])
                .unwrap_or(0..0);
            return Err(error(
                span,
                format!(
                    "at most {MAX_APPS} apps are supported; this is app {}",
                    MAX_APPS + 1
                ),
            ));
        }
        for (i, app) in document.apps.iter().enumerate() {
            if app.name.get_ref().trim().is_empty() {
                return Err(error(
                    app.name.span(),
                    "app `name` must not be empty".into(),
                ));
            }
            if let Some(earlier) = document.apps[..i]
                .iter()
                .find(|a| a.name.get_ref() == app.name.get_ref())
            {
                let (line, _) = super::line_column(source, earlier.name.span().start);
                return Err(error(
                    app.name.span(),
                    format!(
                        "app `{}` is defined twice (first at line {line})",
                        app.name.get_ref()
                    ),
                ));
            }
            if let Err(message) = app.workload.validate() {
                let (table, header) = workload_table(spans, i);
                return Err(blame(
                    String::new(),
                    message,
                    &[table],
                    header.unwrap_or(app.name.span()),
                ));
            }
            if let Some(ioprio) = &app.ioprio {
                crate::task::parse_ioprio(ioprio).map_err(|m| {
                    error(
                        app.name.span(),
                        format!("app `{}`: {m}", app.name.get_ref()),
                    )
                })?;
            }
            if !(-20..=19).contains(&app.nice) {
                return Err(error(
                    app.name.span(),
                    format!(
                        "app `{}`: nice = {} is out of range: it must be between -20 and 19",
                        app.name.get_ref(),
                        app.nice
                    ),
                ));
            }
        }
        let mut tasks = 0u64;
        for (i, app) in document.apps.iter().enumerate() {
            tasks += app.workload.tasks();
            if tasks > MAX_WORKLOAD_TASKS {
                let (_, header) = workload_table(spans, i);
                return Err(error(
                    header.unwrap_or(app.name.span()),
                    format!(
                        "the apps up to `{}` start {tasks} tasks, more than the limit of {MAX_WORKLOAD_TASKS}: lower `depth`, `iodepth` or `numjobs`",
                        app.name.get_ref()
                    ),
                ));
            }
        }
        let foreground: Vec<usize> = (0..document.apps.len())
            .filter(|&i| document.apps[i].role == Role::Foreground)
            .collect();
        if let [first, second, ..] = foreground[..] {
            let role = |i: usize| {
                spans
                    .value_span(&[key("app"), Seg::Index(i), key("role")])
                    .unwrap_or(document.apps[i].name.span())
            };
            return Err(error(
                role(second),
                format!(
                    "app `{}` has role = \"foreground\" but app `{}` (line {}) already has it: at most one app is on screen at the start",
                    document.apps[second].name.get_ref(),
                    document.apps[first].name.get_ref(),
                    line_of(role(first))
                ),
            ));
        }

        let app_index = |name: &Spanned<String>| {
            document
                .apps
                .iter()
                .position(|a| a.name.get_ref() == name.get_ref())
                .ok_or_else(|| {
                    error(
                        name.span(),
                        format!(
                            "unknown app `{}` (apps: {})",
                            name.get_ref(),
                            document
                                .apps
                                .iter()
                                .map(|a| format!(
                                    "{} at line {}",
                                    a.name.get_ref(),
                                    line_of(a.name.span())
                                ))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })
        };
        let mut timeline = Vec::new();
        for entry in &document.timeline {
            let span = entry.span();
            let entry = entry.get_ref();
            let actions = [&entry.foreground, &entry.start, &entry.stop];
            if actions.iter().filter(|a| a.is_some()).count() != 1 {
                return Err(error(
                    span,
                    "a timeline entry needs exactly one of `foreground`, `start`, `stop`".into(),
                ));
            }
            let action = if let Some(name) = &entry.foreground {
                let index = app_index(name)?;
                if document.apps[index].role == Role::Service {
                    return Err(error(
                        name.span(),
                        format!(
                            "app `{}` is a service and has no activity to bring to the foreground",
                            name.get_ref()
                        ),
                    ));
                }
                TimelineAction::Foreground(index)
            } else if let Some(name) = &entry.start {
                TimelineAction::Start(app_index(name)?)
            } else {
                let name = entry.stop.as_ref().expect("one action is set");
                TimelineAction::Stop(app_index(name)?)
            };
            timeline.push(TimelineEvent {
                at: entry.at,
                action,
            });
        }
        timeline.sort_by_key(|e| e.at);

        let base_stack = raw
            .get("stack")
            .and_then(|v| v.as_table())
            .cloned()
            .unwrap_or_default();
        let raw_variants: Vec<&toml::Value> = raw
            .get("variant")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let mut variants = Vec::new();
        for (i, entry) in document.variants.iter().enumerate() {
            let name = entry.name.get_ref();
            if name.trim().is_empty() || name.contains(char::is_whitespace) {
                return Err(error(
                    entry.name.span(),
                    format!("variant name `{name}` must be non-empty and have no spaces"),
                ));
            }
            if document.variants[..i]
                .iter()
                .any(|v| v.name.get_ref() == name)
            {
                return Err(error(
                    entry.name.span(),
                    format!("variant `{name}` is defined twice"),
                ));
            }
            let mut merged = base_stack.clone();
            if let Some(over) = raw_variants
                .get(i)
                .and_then(|v| v.get("stack"))
                .and_then(|v| v.as_table())
            {
                merge_tables(&mut merged, over);
            }
            let provenance = super::eras::Provenance::of(&merged);
            let merged = with_phone(merged).map_err(|m| {
                // The variant's own phone if it names one, else the base stack's.
                let own = [key("variant"), Seg::Index(i), key("stack"), key("phone")];
                let span = spans
                    .value_span(&own)
                    .or_else(|| spans.value_span(&[key("stack"), key("phone")]))
                    .unwrap_or(entry.name.span());
                error(span, m)
            })?;
            let stack: StackConfig =
                toml::Value::Table(merged)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        error(
                            entry.name.span(),
                            format!(
                                "variant `{name}`: its stack over the base stack: {}",
                                e.message()
                            ),
                        )
                    })?;
            for (table, result) in stack.check_tables().into_iter().chain(stack.check_eras()) {
                if let Err(message) = result {
                    let own = vec![key("variant"), Seg::Index(i), key("stack"), key(table)];
                    let base = vec![key("stack"), key(table)];
                    let fallback = spans.value_span(&own).unwrap_or(entry.name.span());
                    return Err(blame(
                        format!("variant `{name}`: [stack.{table}] "),
                        message,
                        &[own, base],
                        fallback,
                    ));
                }
            }
            stack
                .check_app_cgroups(&document.apps)
                .map_err(|m| error(entry.name.span(), format!("variant `{name}`: {m}")))?;
            variants.push(Variant {
                name: name.clone(),
                description: entry.description.clone(),
                stack,
                provenance,
            });
        }
        if variants.is_empty() {
            let phone_span = spans
                .value_span(&[key("stack"), key("phone")])
                .unwrap_or(0..0);
            let provenance = super::eras::Provenance::of(&base_stack);
            let merged =
                with_phone(base_stack.clone()).map_err(|m| error(phone_span.clone(), m))?;
            let base: StackConfig = toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| error(phone_span, e.message().to_string()))?;
            for (table, result) in base.check_tables().into_iter().chain(base.check_eras()) {
                if let Err(message) = result {
                    let path = vec![key("stack"), key(table)];
                    let fallback = spans.value_span(&path).unwrap_or(0..0);
                    return Err(blame(
                        format!("[stack.{table}] "),
                        message,
                        &[path],
                        fallback,
                    ));
                }
            }
            base.check_app_cgroups(&document.apps)
                .map_err(|m| whole(format!("[stack]: {m}")))?;
            variants.push(Variant {
                name: "base".into(),
                description: String::new(),
                stack: base,
                provenance,
            });
        }
        if variants.len() * seeds.len() > MAX_RUNS {
            let first_too_many = MAX_RUNS / seeds.len();
            let span = if seeds.len() > 1 {
                spans.value_span(&[key("seeds")])
            } else {
                spans.value_span(&[key("variant"), Seg::Index(first_too_many)])
            };
            return Err(ScenarioError::at(
                file,
                source,
                span,
                format!(
                    "{} variants x {} seeds is {} runs, more than the limit of {MAX_RUNS} (runs x threads hold their own stack in memory; split the sweep into several scenarios)",
                    variants.len(),
                    seeds.len(),
                    variants.len() * seeds.len()
                ),
            ));
        }
        // Jobs must fit each variant's device: what `run` would reject, `validate` rejects.
        for (i, app) in document.apps.iter().enumerate() {
            let WorkloadConfig::Fio(config) = &app.workload else {
                continue;
            };
            for variant in &variants {
                let capacity = variant
                    .stack
                    .device
                    .resolve()
                    .expect("validated above")
                    .capacity;
                let check = config
                    .job(app.name.get_ref())
                    .and_then(|job| job.check_region(capacity));
                if let Err(message) = check {
                    let (table, header) = workload_table(spans, i);
                    let prefix = if variants.len() > 1 {
                        format!("variant `{}`: ", variant.name)
                    } else {
                        String::new()
                    };
                    return Err(blame(
                        prefix,
                        message,
                        &[table],
                        header.unwrap_or(app.name.span()),
                    ));
                }
            }
        }
        let _ = whole;

        Ok(Scenario {
            file: file.to_string(),
            name: document.name,
            description: document.description,
            seeds,
            duration,
            end,
            apps: document.apps,
            timeline,
            variants,
        })
    }

    /// Keeps only the variant called `name`.
    pub fn select_variant(&mut self, name: &str) -> Result<(), String> {
        if !self.variants.iter().any(|v| v.name == name) {
            let names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
            return Err(format!(
                "scenario `{}` has no variant `{name}` (variants: {})",
                self.name,
                names.join(", ")
            ));
        }
        self.variants.retain(|v| v.name == name);
        Ok(())
    }

    /// The UID of app `index`.
    pub fn uid(&self, index: usize) -> u32 {
        self.apps[index]
            .uid
            .unwrap_or(FIRST_APPLICATION_UID + index as u32)
    }
}

/// The path of app `index`'s workload table (`app[i].workload.<kind>`) and its header's span.
fn workload_table(spans: &Spans<'_>, index: usize) -> (Vec<Seg>, Option<std::ops::Range<usize>>) {
    let workload = vec![key("app"), Seg::Index(index), key("workload")];
    let kind = spans
        .entries(&workload)
        .into_iter()
        .find(|e| !e.name.contains('.'))
        .map(|e| e.name);
    let mut table = workload;
    if let Some(kind) = kind {
        table.push(key(&kind));
    }
    let header = spans.value_span(&table);
    (table, header)
}

/// `android.os.Process.FIRST_APPLICATION_UID`.
pub const FIRST_APPLICATION_UID: u32 = 10_000;

impl WorkloadConfig {
    /// Whether the workload issues block I/O (so the stack needs a device and block layer).
    pub fn needs_block(&self) -> bool {
        matches!(self, WorkloadConfig::Fio(_) | WorkloadConfig::Replay(_)) || self.needs_storage()
    }

    /// Whether the workload uses files (so the stack needs the page cache and a file system).
    pub fn needs_storage(&self) -> bool {
        match self {
            WorkloadConfig::SeqWrite(_)
            | WorkloadConfig::FileRead(_)
            | WorkloadConfig::Video(_)
            | WorkloadConfig::FsyncWrite(_)
            | WorkloadConfig::Ops(_)
            | WorkloadConfig::Sqlite(_)
            | WorkloadConfig::Filebench(_) => true,
            // fio's default is buffered I/O, through the page cache.
            WorkloadConfig::Fio(config) => config.is_buffered(),
            WorkloadConfig::ToyIo(_) | WorkloadConfig::ToyLocks(_) | WorkloadConfig::Replay(_) => {
                false
            }
        }
    }

    /// The tasks the workload starts.
    fn tasks(&self) -> u64 {
        match self {
            WorkloadConfig::ToyIo(config) => u64::from(config.depth),
            WorkloadConfig::Fio(config) => config.job("app").map_or(1, |job| {
                u64::from(job.numjobs) * u64::from(job.effective_iodepth())
            }),
            _ => 1,
        }
    }

    fn validate(&self) -> Result<(), String> {
        match self {
            WorkloadConfig::ToyIo(config) => config.validate(),
            WorkloadConfig::ToyLocks(config) => config.validate(),
            WorkloadConfig::Fio(config) => config.job("app").map(|_| ()),
            WorkloadConfig::SeqWrite(config) => config.validate(),
            WorkloadConfig::FileRead(config) => config.validate(),
            WorkloadConfig::Video(config) => config.validate(),
            WorkloadConfig::FsyncWrite(config) => config.validate(),
            WorkloadConfig::Ops(config) => config.validate(),
            WorkloadConfig::Filebench(config) => config.validate(),
            WorkloadConfig::Replay(config) => config.validate(),
            WorkloadConfig::Sqlite(config) => config.validate(),
        }
    }
}

mod optional_duration {
    use crate::units::Nanos;
    use serde::Deserializer;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
        crate::units::serde_units::duration::deserialize(d).map(Some)
    }
}
