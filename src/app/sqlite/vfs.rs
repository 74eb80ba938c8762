//! The SQLite VFS `"mobistack"`: SQLite's file operations as simulated system calls.
//!
//! Every method mirrors what the unix VFS (os_unix.c of the bundled SQLite) does on Linux, so
//! that the calls the simulated kernel sees are the ones a phone sees:
//!
//! | SQLite | unix VFS on Linux | here |
//! |---|---|---|
//! | `xOpen` | `open(O_RDWR\|O_CREAT[\|O_EXCL])`; a new journal or WAL marks `UNIXFILE_DIRSYNC`; delete-on-close files are unlinked at once | the same ([`Call::Open`], [`Call::Unlink`]) |
//! | `xRead` / `xWrite` | `pread64` / `pwrite64` (`seekAndRead`, `seekAndWrite`) | [`Call::Pread`], [`Call::Pwrite`]; a short read zero-fills and returns `SQLITE_IOERR_SHORT_READ` |
//! | `xTruncate` | `ftruncate` | [`Call::Ftruncate`] |
//! | `xSync` | `full_fsync`: `fdatasync` (`fsync` unless built with `-Dfdatasync=fdatasync`, as AOSP is), then once for a new journal the directory (`osOpenDirectory`, `fsync`, `close`) | [`Call::Sync`] (the task picks fsync or fdatasync as the build option says), [`Call::SyncDirectory`] |
//! | `xFileSize` | `fstat` | [`Call::Fstat`] |
//! | `xDelete` | `unlink`, then with `dirSync` the directory's fsync | [`Call::Unlink`], [`Call::SyncDirectory`] |
//! | `xAccess` | `stat` (EXISTS: a regular file must be non-empty) / `access` | [`Call::Stat`] |
//! | `xLock` ... | `fcntl(F_SETLK)` byte ranges over a per-inode table | [`Call::Lock`] etc. ([`super::locks`]) |
//! | `xShmMap` | `open("-shm")`, `ftruncate(3)`, a 1-byte `pwrite` at the end of each new 4 KiB page, `mmap` | the same system calls; the memory is the task's ([`Call::ShmMap`]) |
//! | `xSleep`, `xCurrentTime` | `usleep`, `gettimeofday` | virtual time |
//! | `xRandomness` | `/dev/urandom` | a stream seeded from the run's seed |
//!
//! Simplifications: files opened without a name (temporary databases and journals) live in
//! memory, as Android's build makes them (`-DSQLITE_TEMP_STORE=3`); `SQLITE_FCNTL_*` controls
//! are answered `SQLITE_NOTFOUND` except the few SQLite needs; no memory-mapped I/O of the
//! database (`iVersion` 2 methods: no `xFetch`), as the default `mmap_size` of 0 gives; pages of
//! the `-shm` file dirtied through its mapping are not written back (the mapping is memory).

use super::link::{self, Call, Reply};
use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// The name the connections open the VFS by.
pub const VFS_NAME: &CStr = c"mobistack";

/// `SQLITE_DEFAULT_SECTOR_SIZE` (4096), what `unixSectorSize` returns on Linux.
const SECTOR_SIZE: c_int = 4096;
/// `MAX_PATHNAME` of os_unix.c.
const MAX_PATHNAME: c_int = 512;
/// Linux's `open` flags (include/uapi/asm-generic/fcntl.h).
const O_RDONLY: u32 = 0;
const O_RDWR: u32 = 0o2;
const O_CREAT: u32 = 0o100;
const O_EXCL: u32 = 0o200;
/// `ENOENT`.
const ENOENT: i32 = 2;

/// What SQLite's file handle carries besides its methods.
struct FileState {
    /// The simulated descriptor; `None` for an in-memory temporary file.
    fd: Option<i32>,
    memory: Vec<u8>,
    path: String,
    /// `UNIXFILE_DIRSYNC`: a journal or WAL this open created; its first sync also syncs the
    /// directory.
    dirsync: bool,
    /// The lock level this handle holds (main databases only).
    lock: c_int,
    /// `setDeviceCharacteristics`' answer, asked once (`F2FS_IOC_GET_FEATURES`).
    batch_atomic: Option<bool>,
}

/// SQLite's `sqlite3_file` with our state behind it.
#[repr(C)]
struct SimFile {
    base: ffi::sqlite3_file,
    state: *mut FileState,
}

/// Whether registration succeeded (the VFS itself is leaked: SQLite keeps a pointer to it for the
/// life of the process).
static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();

/// Registers the VFS with SQLite (once per process); the error is SQLite's result code.
pub fn register() -> Result<(), String> {
    let result = REGISTERED.get_or_init(|| {
        let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
            iVersion: 2,
            szOsFile: std::mem::size_of::<SimFile>() as c_int,
            mxPathname: MAX_PATHNAME,
            pNext: std::ptr::null_mut(),
            zName: VFS_NAME.as_ptr(),
            pAppData: std::ptr::null_mut(),
            xOpen: Some(x_open),
            xDelete: Some(x_delete),
            xAccess: Some(x_access),
            xFullPathname: Some(x_full_pathname),
            xDlOpen: Some(x_dl_open),
            xDlError: Some(x_dl_error),
            xDlSym: Some(x_dl_sym),
            xDlClose: Some(x_dl_close),
            xRandomness: Some(x_randomness),
            xSleep: Some(x_sleep),
            xCurrentTime: Some(x_current_time),
            xGetLastError: Some(x_get_last_error),
            xCurrentTimeInt64: Some(x_current_time_int64),
            xSetSystemCall: None,
            xGetSystemCall: None,
            xNextSystemCall: None,
        }));
        // SAFETY: `vfs` is 'static and fully initialised; not the default VFS.
        let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(rc)
        }
    });
    match result {
        Ok(_) => Ok(()),
        Err(rc) => Err(format!("sqlite3_vfs_register failed with code {rc}")),
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

/// # Safety
/// `file` must be a handle this VFS opened and not yet closed.
unsafe fn state<'a>(file: *mut ffi::sqlite3_file) -> &'a mut FileState {
    &mut *(*(file as *mut SimFile)).state
}

unsafe fn c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    Some(CStr::from_ptr(ptr).to_string_lossy().into_owned())
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    link::guard(ffi::SQLITE_CANTOPEN, || {
        let sim_file = file as *mut SimFile;
        (*sim_file).base.pMethods = std::ptr::null();
        let kind = flags & 0x0FFF00;
        let create = flags & ffi::SQLITE_OPEN_CREATE != 0;
        let path = c_str(name);
        let new_journal = create
            && (kind == ffi::SQLITE_OPEN_SUPER_JOURNAL
                || kind == ffi::SQLITE_OPEN_MAIN_JOURNAL
                || kind == ffi::SQLITE_OPEN_WAL);
        let fd = match &path {
            // A temporary file: memory, as SQLITE_TEMP_STORE=3 builds make it.
            None => None,
            Some(path) => {
                let mut open_flags = if flags & ffi::SQLITE_OPEN_READWRITE != 0 {
                    O_RDWR
                } else {
                    O_RDONLY
                };
                if create {
                    open_flags |= O_CREAT;
                }
                if flags & ffi::SQLITE_OPEN_EXCLUSIVE != 0 {
                    open_flags |= O_EXCL;
                }
                match link::call(Call::Open {
                    path: path.clone(),
                    flags: open_flags,
                }) {
                    Reply::Fd(fd) => Some(fd),
                    _ => return ffi::SQLITE_CANTOPEN,
                }
            }
        };
        if let (Some(path), true) = (&path, flags & ffi::SQLITE_OPEN_DELETEONCLOSE != 0) {
            // unixOpen: `osUnlink(zName)` right after opening a delete-on-close file.
            let _ = link::call(Call::Unlink { path: path.clone() });
        }
        if !out_flags.is_null() {
            *out_flags = flags;
        }
        let state = Box::new(FileState {
            fd,
            memory: Vec::new(),
            path: path.unwrap_or_default(),
            dirsync: new_journal,
            lock: ffi::SQLITE_LOCK_NONE,
            batch_atomic: None,
        });
        (*sim_file).state = Box::into_raw(state);
        (*sim_file).base.pMethods = &METHODS;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    link::guard(ffi::SQLITE_IOERR_CLOSE, || {
        let sim_file = file as *mut SimFile;
        let state = Box::from_raw((*sim_file).state);
        (*sim_file).state = std::ptr::null_mut();
        if state.lock != ffi::SQLITE_LOCK_NONE {
            let _ = link::call(Call::Unlock {
                path: state.path.clone(),
                level: ffi::SQLITE_LOCK_NONE,
            });
        }
        match state.fd {
            Some(fd) => match link::call(Call::Close { fd }) {
                Reply::Done => ffi::SQLITE_OK,
                _ => ffi::SQLITE_IOERR_CLOSE,
            },
            None => ffi::SQLITE_OK,
        }
    })
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_READ, || {
        let state = state(file);
        let out = std::slice::from_raw_parts_mut(buf as *mut u8, amount.max(0) as usize);
        let offset = offset.max(0) as u64;
        let got = match state.fd {
            None => {
                let start = (offset as usize).min(state.memory.len());
                let end = (start + out.len()).min(state.memory.len());
                out[..end - start].copy_from_slice(&state.memory[start..end]);
                end - start
            }
            Some(fd) => match link::call(Call::Pread {
                fd,
                offset,
                len: out.len(),
            }) {
                Reply::Data(data) => {
                    let n = data.len().min(out.len());
                    out[..n].copy_from_slice(&data[..n]);
                    n
                }
                _ => return ffi::SQLITE_IOERR_READ,
            },
        };
        if got < out.len() {
            // unixRead: "Unread parts of the buffer must be zero-filled".
            out[got..].fill(0);
            return ffi::SQLITE_IOERR_SHORT_READ;
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_WRITE, || {
        let state = state(file);
        let data = std::slice::from_raw_parts(buf as *const u8, amount.max(0) as usize);
        let offset = offset.max(0) as usize;
        match state.fd {
            None => {
                if state.memory.len() < offset + data.len() {
                    state.memory.resize(offset + data.len(), 0);
                }
                state.memory[offset..offset + data.len()].copy_from_slice(data);
                ffi::SQLITE_OK
            }
            Some(fd) => match link::call(Call::Pwrite {
                fd,
                offset: offset as u64,
                data: data.to_vec(),
            }) {
                Reply::Size(n) if n as usize == data.len() => ffi::SQLITE_OK,
                Reply::Error(28) => ffi::SQLITE_FULL,
                _ => ffi::SQLITE_IOERR_WRITE,
            },
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    link::guard(ffi::SQLITE_IOERR_TRUNCATE, || {
        let state = state(file);
        match state.fd {
            None => {
                state.memory.truncate(size.max(0) as usize);
                ffi::SQLITE_OK
            }
            Some(fd) => match link::call(Call::Ftruncate {
                fd,
                size: size.max(0) as u64,
            }) {
                Reply::Done => ffi::SQLITE_OK,
                _ => ffi::SQLITE_IOERR_TRUNCATE,
            },
        }
    })
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    link::guard(ffi::SQLITE_IOERR_FSYNC, || {
        let state = state(file);
        let Some(fd) = state.fd else {
            return ffi::SQLITE_OK;
        };
        if !matches!(link::call(Call::Sync { fd }), Reply::Done) {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        if state.dirsync {
            // unixSync: the directory once, errors ignored.
            state.dirsync = false;
            let _ = link::call(Call::SyncDirectory {
                path: state.path.clone(),
            });
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_FSTAT, || {
        let state = state(file);
        let bytes = match state.fd {
            None => state.memory.len() as u64,
            Some(fd) => match link::call(Call::Fstat { fd }) {
                Reply::Size(n) => n,
                _ => return ffi::SQLITE_IOERR_FSTAT,
            },
        };
        // unixFileSize: a 1-byte file is reported empty (ticket #3260).
        *size = if bytes == 1 { 0 } else { bytes as i64 };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    link::guard(ffi::SQLITE_IOERR_LOCK, || {
        let state = state(file);
        if state.fd.is_none() || state.lock >= level {
            return ffi::SQLITE_OK;
        }
        match link::call(Call::Lock {
            path: state.path.clone(),
            level,
        }) {
            Reply::Flag(true) => {
                state.lock = level;
                ffi::SQLITE_OK
            }
            Reply::Flag(false) => {
                if level == ffi::SQLITE_LOCK_EXCLUSIVE && state.lock >= ffi::SQLITE_LOCK_SHARED {
                    // unixLock keeps PENDING when readers remain.
                    state.lock = ffi::SQLITE_LOCK_PENDING;
                }
                ffi::SQLITE_BUSY
            }
            _ => ffi::SQLITE_IOERR_LOCK,
        }
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    link::guard(ffi::SQLITE_IOERR_UNLOCK, || {
        let state = state(file);
        if state.fd.is_none() || state.lock <= level {
            return ffi::SQLITE_OK;
        }
        match link::call(Call::Unlock {
            path: state.path.clone(),
            level,
        }) {
            Reply::Done => {
                state.lock = level;
                ffi::SQLITE_OK
            }
            _ => ffi::SQLITE_IOERR_UNLOCK,
        }
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    link::guard(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, || {
        let state = state(file);
        if state.fd.is_none() {
            *out = 0;
            return ffi::SQLITE_OK;
        }
        match link::call(Call::CheckReserved {
            path: state.path.clone(),
        }) {
            Reply::Flag(reserved) => {
                *out = c_int::from(reserved);
                ffi::SQLITE_OK
            }
            _ => ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
        }
    })
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    _arg: *mut c_void,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR, || {
        // unixFileControl with SQLITE_ENABLE_BATCH_ATOMIC_WRITE: the three F2FS ioctls.
        let (atomic, error) = match op {
            ffi::SQLITE_FCNTL_BEGIN_ATOMIC_WRITE => {
                (link::AtomicOp::Begin, ffi::SQLITE_IOERR_BEGIN_ATOMIC)
            }
            ffi::SQLITE_FCNTL_COMMIT_ATOMIC_WRITE => {
                (link::AtomicOp::Commit, ffi::SQLITE_IOERR_COMMIT_ATOMIC)
            }
            ffi::SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE => {
                (link::AtomicOp::Rollback, ffi::SQLITE_IOERR_ROLLBACK_ATOMIC)
            }
            _ => return ffi::SQLITE_NOTFOUND,
        };
        let Some(fd) = state(file).fd else {
            return ffi::SQLITE_NOTFOUND;
        };
        match link::call(Call::AtomicWrite { fd, op: atomic }) {
            Reply::Done => ffi::SQLITE_OK,
            _ => error,
        }
    })
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    SECTOR_SIZE
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    link::guard(0, || {
        // unixDeviceCharacteristics with SQLITE_POWERSAFE_OVERWRITE=1 (AOSP's build flag), plus
        // SQLITE_IOCAP_BATCH_ATOMIC where setDeviceCharacteristics finds F2FS's atomic writes.
        let state = state(file);
        let batch = match (state.batch_atomic, state.fd) {
            (Some(known), _) => known,
            (None, None) => false,
            (None, Some(fd)) => {
                let supported = matches!(
                    link::call(Call::AtomicWriteSupported { fd }),
                    Reply::Flag(true)
                );
                state.batch_atomic = Some(supported);
                supported
            }
        };
        let mut caps = ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE;
        if batch {
            caps |= ffi::SQLITE_IOCAP_BATCH_ATOMIC;
        }
        caps
    })
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_SHMMAP, || {
        let state = state(file);
        match link::call(Call::ShmMap {
            path: state.path.clone(),
            region: region.max(0) as usize,
            size: size.max(0) as usize,
            extend: extend != 0,
        }) {
            Reply::Pointer(address) => {
                *out = address as *mut c_void;
                ffi::SQLITE_OK
            }
            _ => ffi::SQLITE_IOERR_SHMMAP,
        }
    })
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_SHMLOCK, || {
        let state = state(file);
        match link::call(Call::ShmLock {
            path: state.path.clone(),
            offset: offset.max(0) as usize,
            n: n.max(0) as usize,
            lock: flags & ffi::SQLITE_SHM_LOCK != 0,
            exclusive: flags & ffi::SQLITE_SHM_EXCLUSIVE != 0,
        }) {
            Reply::Flag(true) => ffi::SQLITE_OK,
            Reply::Flag(false) => ffi::SQLITE_BUSY,
            _ => ffi::SQLITE_IOERR_SHMLOCK,
        }
    })
}

unsafe extern "C" fn x_shm_barrier(_file: *mut ffi::sqlite3_file) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    link::guard(ffi::SQLITE_IOERR_SHMMAP, || {
        let state = state(file);
        match link::call(Call::ShmUnmap {
            path: state.path.clone(),
            delete: delete != 0,
        }) {
            Reply::Done => ffi::SQLITE_OK,
            _ => ffi::SQLITE_IOERR_SHMMAP,
        }
    })
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_DELETE, || {
        let Some(path) = c_str(name) else {
            return ffi::SQLITE_IOERR_DELETE;
        };
        match link::call(Call::Unlink { path: path.clone() }) {
            Reply::Done => {}
            Reply::Error(ENOENT) => return ffi::SQLITE_IOERR_DELETE_NOENT,
            _ => return ffi::SQLITE_IOERR_DELETE,
        }
        if sync_dir & 1 != 0 {
            let _ = link::call(Call::SyncDirectory { path });
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    link::guard(ffi::SQLITE_IOERR_ACCESS, || {
        let Some(path) = c_str(name) else {
            *out = 0;
            return ffi::SQLITE_OK;
        };
        match link::call(Call::Stat { path }) {
            Reply::Stat(stat) => {
                *out = c_int::from(match stat {
                    None => false,
                    // unixAccess: EXISTS needs a non-empty regular file (directories count too;
                    // the task answers Some(size) for both).
                    Some(size) => flags != ffi::SQLITE_ACCESS_EXISTS || size > 0,
                });
                ffi::SQLITE_OK
            }
            _ => ffi::SQLITE_IOERR_ACCESS,
        }
    })
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    link::guard(ffi::SQLITE_CANTOPEN, || {
        let name = CStr::from_ptr(name).to_bytes();
        let mut full = Vec::with_capacity(name.len() + 1);
        if name.first() != Some(&b'/') {
            full.push(b'/');
        }
        full.extend_from_slice(name);
        if full.len() + 1 > n_out.max(0) as usize {
            return ffi::SQLITE_CANTOPEN;
        }
        std::ptr::copy_nonoverlapping(full.as_ptr(), out as *mut u8, full.len());
        *out.add(full.len()) = 0;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_dl_open(_vfs: *mut ffi::sqlite3_vfs, _name: *const c_char) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn x_dl_error(_vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    let message = c"extensions are not loaded in mobistack";
    let bytes = message.to_bytes_with_nul();
    let len = bytes.len().min(n.max(0) as usize);
    if len > 0 {
        std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, out, len);
        *out.add(len - 1) = 0;
    }
}

type DlSym = unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char);

unsafe extern "C" fn x_dl_sym(
    _vfs: *mut ffi::sqlite3_vfs,
    _handle: *mut c_void,
    _symbol: *const c_char,
) -> Option<DlSym> {
    None
}

unsafe extern "C" fn x_dl_close(_vfs: *mut ffi::sqlite3_vfs, _handle: *mut c_void) {}

unsafe extern "C" fn x_randomness(
    _vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    link::guard(0, || {
        let out = std::slice::from_raw_parts_mut(out as *mut u8, n.max(0) as usize);
        link::randomness(out);
        n
    })
}

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    link::guard(0, || {
        let _ = link::call(Call::Sleep {
            micros: micros.max(0) as u64,
        });
        micros
    })
}

/// Virtual time as a Julian day number in milliseconds: the run starts at the Unix epoch
/// (`unixEpoch` of os_unix.c is 24405875 * 8640000).
fn now_julian_ms() -> i64 {
    const UNIX_EPOCH_JULIAN_MS: i64 = 24_405_875 * 8_640_000;
    let nanos = match link::call(Call::Now) {
        Reply::Time(ns) => ns,
        _ => 0,
    };
    UNIX_EPOCH_JULIAN_MS + (nanos / 1_000_000) as i64
}

unsafe extern "C" fn x_current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    link::guard(ffi::SQLITE_ERROR, || {
        *out = now_julian_ms() as f64 / 86_400_000.0;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_current_time_int64(
    _vfs: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    link::guard(ffi::SQLITE_ERROR, || {
        *out = now_julian_ms();
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_get_last_error(
    _vfs: *mut ffi::sqlite3_vfs,
    _n: c_int,
    _out: *mut c_char,
) -> c_int {
    0
}
