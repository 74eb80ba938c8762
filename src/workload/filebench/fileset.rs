//! Filesets (fileset.c): the tree of directories and files a fileset describes, its population,
//! the create phase, and how flowops pick files from it.
//!
//! - Population (`fileset_populate`, `fileset_populate_subdir`, `fileset_populate_file`): the mean
//!   depth is `ln(entries + leafdirs) / ln(dirwidth)`; every directory draws its depth limit and
//!   its width from `gamma_dist_knuth(dirgamma / 1000, mean / gamma)` (`dirgamma` defaults to
//!   1500; `define file` uses width 10 and gamma 0), becomes a leaf when its depth reaches the
//!   limit, and a leaf holds up to `width` files; the root keeps adding subdirectories until every
//!   file has a place. Names are `%08d` serials, so a file's path is
//!   `$path/$name/00000001/.../00000007`. Each file's size is the `size` attribute evaluated once
//!   per file: a `cvar-gamma` variable gives gamma-distributed sizes (filebench 1.5); a constant
//!   size with 1.4.9's `filesizegamma=G` (G x 1000) is drawn from `gamma_dist_knuth(G / 1000,
//!   size / (G / 1000))`, as 1.4.9's `fileset_populate_file` did.
//! - Create phase (`fileset_create`, `fileset_alloc_file`): every directory is made, and each
//!   file exists before the run with probability `prealloc` percent (`prealloc` alone is 100 %),
//!   with its blocks on disk and nothing in the page cache: 1.4.9 dropped the cache of each
//!   preallocated file unless `cached` was set (`FB_FREEMEM`), and the default was not cached.
//!   It happens at setup, in no virtual time (filebench clears its statistics after it). The
//!   files are decided in index order (filebench picks them in random order; each file's outcome
//!   is an independent draw either way).
//! - Picking (`fileset_pick`): files that exist and files that do not are kept in two sets
//!   ordered by index; `openfile`, `statfile` and `deletefile` take the next existing file after
//!   a rotor shared by all threads (per thread with `opennext`), `createfile` the next missing
//!   one, `indexed=` a given index; a busy file (being opened, closed or deleted by another
//!   thread) is skipped; when every file of the set is busy the pick fails, which filebench
//!   reports as "could not obtain a file" (FILEBENCH_NORSC), and when no file of the whole
//!   fileset is idle the picker waits.
//!
//! Simplified: the idle count is the number of files not busy (filebench's counter drifts when a
//! file open by several threads is closed); leaf directories are created but no flowop uses
//! them (`makedir`, `removedir` and `listdir` are not supported).

use super::random::{gamma_dist_knuth, RandomVar};
use crate::sim::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// An integer attribute: a constant, or a random variable drawn at each evaluation.
#[derive(Debug, Clone)]
pub enum IntExpr {
    Const(i64),
    Random(Rc<RandomVar>),
}

impl IntExpr {
    /// `avd_get_int`: a random draw is truncated to an integer (negative draws give 0, as the
    /// unsigned `fbint_t` cannot hold them).
    pub fn eval(&self, rng: &mut Rng) -> i64 {
        match self {
            IntExpr::Const(v) => *v,
            IntExpr::Random(var) => var.sample(rng).max(0.0).min(i64::MAX as f64) as i64,
        }
    }

    /// `avd_get_dbl`.
    pub fn eval_f64(&self, rng: &mut Rng) -> f64 {
        match self {
            IntExpr::Const(v) => *v as f64,
            IntExpr::Random(var) => var.sample(rng),
        }
    }

    pub fn is_random(&self) -> bool {
        matches!(self, IntExpr::Random(_))
    }
}

/// A fileset or file definition, resolved.
#[derive(Debug, Clone)]
pub struct FilesetSpec {
    pub name: String,
    pub path: String,
    /// `define file`: one file, dirwidth 10, dirgamma 0.
    pub is_file: bool,
    pub entries: u64,
    pub leafdirs: u64,
    pub size: IntExpr,
    /// 1.4.9's `filesizegamma` / 1000.
    pub size_gamma: Option<f64>,
    pub dirwidth: IntExpr,
    /// `dirgamma` / 1000.
    pub dirgamma: f64,
    pub dirdepthrv: Option<Rc<RandomVar>>,
    /// Percent of files created before the run.
    pub prealloc: u64,
    pub readonly: bool,
    pub writeonly: bool,
    pub line: usize,
}

/// Bound on directories and files of one fileset.
pub const MAX_ENTRIES: usize = 10_000_000;
/// Bound on directory nesting.
const MAX_DEPTH: u32 = 256;

/// A directory of the tree: its parent (None for the fileset's root) and serial.
#[derive(Debug, Clone, Copy)]
struct Dir {
    parent: Option<u32>,
    serial: u32,
}

/// A file of the fileset.
#[derive(Debug, Clone)]
pub struct Entry {
    dir: u32,
    serial: u32,
    /// `fse_size`: the size it is created with (writewholefile's length).
    pub size: u64,
    pub exists: bool,
    pub busy: bool,
    pub open_count: u32,
}

/// Which files a pick may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickFrom {
    Existing,
    Missing,
}

/// The outcome of [`Fileset::pick`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Picked(u32),
    /// No file of the fileset is idle: wait and retry (`fs_idle_files == 0`).
    Wait,
    /// No suitable file (FILEBENCH_NORSC).
    None,
}

/// The runtime state of one fileset.
#[derive(Debug)]
pub struct Fileset {
    pub spec: Rc<FilesetSpec>,
    /// `$path/$name`.
    pub root: String,
    dirs: Vec<Dir>,
    pub files: Vec<Entry>,
    leafdirs: Vec<(u32, u32)>,
    existing: BTreeSet<u32>,
    missing: BTreeSet<u32>,
    busy: usize,
    existing_rotor: BTreeMap<usize, u32>,
    missing_rotor: u32,
    /// Total bytes of all files' sizes (`fs_bytes`).
    pub bytes: u64,
    pub mean_depth: f64,
    pub mean_width: f64,
}

struct Populator<'a> {
    spec: &'a FilesetSpec,
    rng: &'a mut Rng,
    mean_width: f64,
    mean_depth: f64,
    fixed_width: bool,
    dirs: Vec<Dir>,
    files: Vec<Entry>,
    leafdirs: Vec<(u32, u32)>,
    bytes: u64,
}

impl Populator<'_> {
    fn gamma_or(&mut self, mean: f64) -> f64 {
        if self.spec.dirgamma > 0.0 {
            gamma_dist_knuth(self.spec.dirgamma, mean / self.spec.dirgamma, self.rng)
        } else {
            mean
        }
    }

    fn file_size(&mut self) -> u64 {
        match (&self.spec.size, self.spec.size_gamma) {
            (IntExpr::Const(mean), Some(gamma)) if gamma > 0.0 => {
                gamma_dist_knuth(gamma, *mean as f64 / gamma, self.rng) as u64
            }
            (size, _) => size.eval(self.rng).max(0) as u64,
        }
    }

    /// `fileset_populate_subdir`.
    fn subdir(&mut self, parent: Option<u32>, serial: u32, depth: u32) -> Result<(), String> {
        let depth = depth + 1;
        if depth > MAX_DEPTH {
            return Err(format!(
                "fileset `{}`: directories nest deeper than {MAX_DEPTH} levels",
                self.spec.name
            ));
        }
        if self.dirs.len() + self.files.len() >= MAX_ENTRIES {
            return Err(format!(
                "fileset `{}` has more than {MAX_ENTRIES} entries",
                self.spec.name
            ));
        }
        let me = self.dirs.len() as u32;
        self.dirs.push(Dir { parent, serial });
        let mut depth_limit = match &self.spec.dirdepthrv {
            Some(var) => var.sample(self.rng).trunc(),
            None => self.gamma_or(self.mean_depth).trunc(),
        };
        let mut width = if self.fixed_width {
            self.gamma_or(self.mean_width)
        } else {
            match &self.spec.dirwidth {
                IntExpr::Random(var) => var.sample(self.rng),
                IntExpr::Const(v) => *v as f64,
            }
        };
        if depth_limit == 0.0 {
            depth_limit = 1.0;
        }
        if width == 0.0 {
            width = 1.0;
        }
        let leaf = f64::from(depth) >= depth_limit;
        let root = parent.is_none();
        let mut i = 1u32;
        while (root || f64::from(i) < width + 1.0) && (self.files.len() as u64) < self.spec.entries
        {
            if !root && leaf {
                let size = self.file_size();
                // filebench's `fs_bytes += fse_size` wraps past 2^64 in C; sizes that large
                // cannot be laid out anyway (prealloc fails with ENOSPC), so the total for the
                // set-up line saturates instead (found by the filebench_run fuzz target).
                self.bytes = self.bytes.saturating_add(size);
                self.files.push(Entry {
                    dir: me,
                    serial: i,
                    size,
                    exists: false,
                    busy: false,
                    open_count: 0,
                });
            } else {
                self.subdir(Some(me), i, depth)?;
            }
            i += 1;
        }
        let mut i = 1u32;
        while (root || f64::from(i) < width + 1.0)
            && (self.leafdirs.len() as u64) < self.spec.leafdirs
        {
            if !root && leaf {
                self.leafdirs.push((me, i));
            } else {
                self.subdir(Some(me), i, depth)?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl Fileset {
    /// `fileset_populate`: builds the tree, drawing from `rng`.
    pub fn populate(spec: Rc<FilesetSpec>, rng: &mut Rng) -> Result<Fileset, String> {
        let (mean_width, fixed_width) = match &spec.dirwidth {
            IntExpr::Random(var) => (var.mean(), false),
            IntExpr::Const(v) => (*v as f64, true),
        };
        let total = spec.entries + spec.leafdirs;
        if total > MAX_ENTRIES as u64 {
            return Err(format!(
                "fileset `{}`: {total} entries exceed the limit of {MAX_ENTRIES}",
                spec.name
            ));
        }
        if mean_width.trunc() < 2.0 && total > 1 {
            return Err(format!(
                "fileset `{}`: dirwidth must be at least 2 (it is {mean_width})",
                spec.name
            ));
        }
        let mean_depth = if total <= 1 {
            0.0
        } else {
            (total as f64).ln() / mean_width.trunc().ln()
        };
        let mut populator = Populator {
            spec: &spec,
            rng,
            mean_width: mean_width.trunc(),
            mean_depth,
            fixed_width,
            dirs: Vec::new(),
            files: Vec::new(),
            leafdirs: Vec::new(),
            bytes: 0,
        };
        populator.subdir(None, 1, 0)?;
        let Populator {
            dirs,
            files,
            leafdirs,
            bytes,
            ..
        } = populator;
        let missing = (0..files.len() as u32).collect();
        Ok(Fileset {
            root: format!("{}/{}", spec.path.trim_end_matches('/'), spec.name),
            spec,
            dirs,
            files,
            leafdirs,
            existing: BTreeSet::new(),
            missing,
            busy: 0,
            existing_rotor: BTreeMap::new(),
            missing_rotor: 0,
            bytes,
            mean_depth,
            mean_width,
        })
    }

    fn dir_path(&self, dir: u32, out: &mut String) {
        let mut chain = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at {
            let entry = self.dirs[d as usize];
            if entry.parent.is_some() {
                chain.push(entry.serial);
            }
            at = entry.parent;
        }
        out.push_str(&self.root);
        for serial in chain.iter().rev() {
            out.push_str(&format!("/{serial:08}"));
        }
    }

    /// The paths of every directory (the root first), for the create phase.
    pub fn dir_paths(&self) -> Vec<String> {
        (0..self.dirs.len() as u32)
            .map(|d| {
                let mut path = String::new();
                self.dir_path(d, &mut path);
                path
            })
            .collect()
    }

    /// The paths of the leaf directories.
    pub fn leafdir_paths(&self) -> Vec<String> {
        self.leafdirs
            .iter()
            .map(|&(dir, serial)| {
                let mut path = String::new();
                self.dir_path(dir, &mut path);
                path.push_str(&format!("/{serial:08}"));
                path
            })
            .collect()
    }

    /// The path of file `index`.
    pub fn file_path(&self, index: u32) -> String {
        let entry = &self.files[index as usize];
        let mut path = String::with_capacity(self.root.len() + 32);
        self.dir_path(entry.dir, &mut path);
        path.push_str(&format!("/{:08}", entry.serial));
        path
    }

    /// The directory holding file `index`.
    pub fn file_dir(&self, index: u32) -> String {
        let mut path = String::new();
        self.dir_path(self.files[index as usize].dir, &mut path);
        path
    }

    pub fn leafdir_count(&self) -> usize {
        self.leafdirs.len()
    }

    /// Marks file `index` as existing (created before the run).
    pub fn set_preexisting(&mut self, index: u32) {
        let entry = &mut self.files[index as usize];
        assert!(!entry.exists, "file {index} preallocated twice");
        entry.exists = true;
        self.missing.remove(&index);
        self.existing.insert(index);
    }

    pub fn existing_count(&self) -> usize {
        self.existing.len()
    }

    /// `fileset_pick` for files. `tid` selects the rotor (0 unless `opennext`); `index`
    /// picks by index (`indexed=`).
    pub fn pick(&mut self, from: PickFrom, tid: usize, index: Option<u32>) -> Pick {
        if self.files.is_empty() {
            return Pick::None;
        }
        if self.busy == self.files.len() {
            return Pick::Wait;
        }
        let set = match from {
            PickFrom::Existing => &self.existing,
            PickFrom::Missing => &self.missing,
        };
        let find = |at: u32| {
            set.range(at..)
                .next()
                .or_else(|| set.iter().next())
                .copied()
        };
        let start = match index {
            Some(i) => find(i),
            None => {
                let rotor = match from {
                    PickFrom::Existing => self.existing_rotor.get(&tid).copied().unwrap_or(0),
                    PickFrom::Missing => self.missing_rotor,
                };
                let found = find(rotor);
                if let Some(found) = found {
                    match from {
                        PickFrom::Existing => {
                            self.existing_rotor.insert(tid, found + 1);
                        }
                        PickFrom::Missing => self.missing_rotor = found + 1,
                    }
                }
                found
            }
        };
        let Some(start) = start else {
            return Pick::None;
        };
        let set = match from {
            PickFrom::Existing => &self.existing,
            PickFrom::Missing => &self.missing,
        };
        let candidate = set
            .range(start..)
            .chain(set.range(..start))
            .copied()
            .find(|&i| !self.files[i as usize].busy);
        match candidate {
            Some(i) => {
                self.files[i as usize].busy = true;
                self.busy += 1;
                Pick::Picked(i)
            }
            None => Pick::None,
        }
    }

    /// Marks a specific file busy (closefile, deletefile by fd); false if it already is.
    pub fn try_grab(&mut self, index: u32) -> bool {
        let entry = &mut self.files[index as usize];
        if entry.busy {
            return false;
        }
        entry.busy = true;
        self.busy += 1;
        true
    }

    /// `fileset_unbusy`: optionally sets whether the file exists, adds `open_delta` to its open
    /// count and clears its busy flag.
    pub fn unbusy(&mut self, index: u32, exists: Option<bool>, open_delta: i64) {
        let entry = &mut self.files[index as usize];
        if let Some(exists) = exists {
            if exists != entry.exists {
                entry.exists = exists;
                if exists {
                    self.missing.remove(&index);
                    self.existing.insert(index);
                } else {
                    self.existing.remove(&index);
                    self.missing.insert(index);
                }
            }
        }
        let entry = &mut self.files[index as usize];
        let count = i64::from(entry.open_count) + open_delta;
        assert!(count >= 0, "file {index} closed more often than opened");
        entry.open_count = count as u32;
        if entry.busy {
            entry.busy = false;
            self.busy -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(entries: u64, width: i64, dirgamma: f64) -> FilesetSpec {
        FilesetSpec {
            name: "bigfileset".into(),
            path: "/tmp".into(),
            is_file: false,
            entries,
            leafdirs: 0,
            size: IntExpr::Const(16384),
            size_gamma: None,
            dirwidth: IntExpr::Const(width),
            dirgamma,
            dirdepthrv: None,
            prealloc: 80,
            readonly: false,
            writeonly: false,
            line: 1,
        }
    }

    #[test]
    fn a_wide_fileset_puts_every_file_in_one_directory() {
        // varmail: 1000 files, dirwidth 1000000 -> depth 0.5 -> everything in 00000001.
        let mut rng = Rng::new(1);
        let set = Fileset::populate(Rc::new(spec(1000, 1_000_000, 1.5)), &mut rng).unwrap();
        assert_eq!(set.files.len(), 1000);
        assert_eq!(set.file_path(0), "/tmp/bigfileset/00000001/00000001");
        assert_eq!(set.file_path(999), "/tmp/bigfileset/00000001/00001000");
        assert_eq!(set.bytes, 1000 * 16384);
    }

    #[test]
    fn a_narrow_fileset_nests_directories_around_the_mean_width() {
        let mut rng = Rng::new(2);
        let set = Fileset::populate(Rc::new(spec(10_000, 20, 1.5)), &mut rng).unwrap();
        assert_eq!(set.files.len(), 10_000);
        assert!((set.mean_depth - 3.07).abs() < 0.01, "{}", set.mean_depth);
        let dirs = set.dir_paths();
        assert!(dirs.len() > 100, "{} directories", dirs.len());
        let mut per_dir = BTreeMap::new();
        for f in 0..set.files.len() as u32 {
            *per_dir.entry(set.file_dir(f)).or_insert(0usize) += 1;
        }
        let mean = 10_000.0 / per_dir.len() as f64;
        assert!((5.0..60.0).contains(&mean), "{mean} files per directory");
        // A single file: /tmp/name/00000001/00000001.
        let mut file = spec(1, 10, 0.0);
        file.is_file = true;
        let one = Fileset::populate(Rc::new(file), &mut rng).unwrap();
        assert_eq!(one.file_path(0), "/tmp/bigfileset/00000001/00000001");
    }

    #[test]
    fn picks_rotate_skip_busy_files_and_move_between_sets() {
        let mut rng = Rng::new(3);
        let mut set = Fileset::populate(Rc::new(spec(4, 100, 0.0)), &mut rng).unwrap();
        set.set_preexisting(1);
        set.set_preexisting(2);
        assert_eq!(set.pick(PickFrom::Existing, 0, None), Pick::Picked(1));
        // File 1 is busy; the rotor moved past it anyway.
        assert_eq!(set.pick(PickFrom::Existing, 0, None), Pick::Picked(2));
        assert_eq!(set.pick(PickFrom::Existing, 0, None), Pick::None);
        set.unbusy(1, None, 1);
        assert_eq!(set.pick(PickFrom::Missing, 0, None), Pick::Picked(0));
        set.unbusy(0, Some(true), 1);
        assert_eq!(set.existing_count(), 3);
        assert_eq!(set.pick(PickFrom::Existing, 0, Some(3)), Pick::Picked(0));
        assert_eq!(set.pick(PickFrom::Missing, 0, None), Pick::Picked(3));
        assert_eq!(set.pick(PickFrom::Existing, 0, None), Pick::Picked(1));
        // Every file busy: wait.
        assert_eq!(set.pick(PickFrom::Existing, 0, None), Pick::Wait);
    }
}
