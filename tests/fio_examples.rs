//! fio's own examples run unchanged (issue 47): every job file of axboe/fio's `examples/` that
//! the real fio 3.33 accepts (`fio --parse-only`: 71 of the 107 at the commit
//! `scripts/fetch-fio-examples.sh` pins) is parsed with fio's meaning and run, or refused with
//! the option and the reason; the list of those refused, with their reasons, is
//! docs/workloads.md's.
//!
//! The job files are fio's (GPL-2.0): they are not copied here. `scripts/fetch-fio-examples.sh`
//! downloads them into `target/fio-examples` (or `MOBISTACK_FIO_EXAMPLES`); `.ci/run` runs it
//! and sets `MOBISTACK_REQUIRE_FIO_EXAMPLES=1`, so that in CI missing files fail the test.
//! Elsewhere, without them, the test says it is skipped and how to fetch them.
//!
//! Each job's `runtime` is cut to 20 ms of virtual time to keep the test fast (a job without
//! one gets it); `mobistack fio FILE` runs them whole.

use mobistack::workload::fio::{parse_job_file_env, run_fio_classified, FioOptions};
use std::path::PathBuf;

/// The examples fio 3.33 accepts (`fio --parse-only FILE` exits 0).
const ACCEPTED_BY_FIO: [&str; 71] = [
    "1mbs_clients.fio",
    "aio-read.fio",
    "backwards-read.fio",
    "basic-verify.fio",
    "butterfly.fio",
    "cmdprio-bssplit.fio",
    "cmdprio-percentage.fio",
    "cpp_null.fio",
    "cpuio.fio",
    "cross-stripe-verify.fio",
    "dedupe-global.fio",
    "dev-dax.fio",
    "dircreate-ioengine.fio",
    "dirdelete-ioengine.fio",
    "dirstat-ioengine.fio",
    "disk-zone-profile.fio",
    "e4defrag.fio",
    "e4defrag2.fio",
    "enospc-pressure.fio",
    "exec.fio",
    "exitwhat.fio",
    "falloc.fio",
    "filecreate-ioengine.fio",
    "filedelete-ioengine.fio",
    "filestat-ioengine.fio",
    "fio-rand-RW.fio",
    "fio-rand-read.fio",
    "fio-rand-write.fio",
    "fio-seq-RW.fio",
    "fio-seq-read.fio",
    "fio-seq-write.fio",
    "fixed-rate-submission.fio",
    "flow.fio",
    "fsx.fio",
    "ftruncate.fio",
    "gfapi.fio",
    "ime.fio",
    "iometer-file-access-server.fio",
    "jesd219.fio",
    "latency-profile.fio",
    "libhdfs.fio",
    "libiscsi.fio",
    "libpmem.fio",
    "libzbc-rand-write.fio",
    "libzbc-seq-read.fio",
    "mtd.fio",
    "netio.fio",
    "netio_multicast.fio",
    "null.fio",
    "numa.fio",
    "page_fault.fio",
    "poisson-rate-submission.fio",
    "rados.fio",
    "rand-zones.fio",
    "rbd.fio",
    "sg_verify-fail.fio",
    "sg_verify.fio",
    "sg_write_same_ndob.fio",
    "ssd-steadystate.fio",
    "ssd-test.fio",
    "steadystate.fio",
    "surface-scan.fio",
    "tiobench-example.fio",
    "uring-cmd-ng.fio",
    "uring-cmd-zoned.fio",
    "waitfor.fio",
    "zbd-rand-write-trim-gc.fio",
    "zbd-rand-write-zone-reset-gc.fio",
    "zbd-rand-write.fio",
    "zbd-seq-read.fio",
    "zipf.fio",
];

/// The examples fio 3.33 itself refuses (options of later fios, engines not built in, `${VAR}`s
/// left empty): mobistack refuses them too.
const REFUSED_BY_FIO: [&str; 36] = [
    "atomic-verify.fio",
    "dfs.fio",
    "example_latency_steadystate.fio",
    "gpudirect-rdmaio-client.fio",
    "gpudirect-rdmaio-server.fio",
    "http-s3-crypto.fio",
    "http-s3-storage-class.fio",
    "http-s3.fio",
    "http-swift.fio",
    "http-webdav.fio",
    "libblkio-io_uring.fio",
    "libblkio-virtio-blk-vfio-pci.fio",
    "libcufile-cufile.fio",
    "libcufile-posix.fio",
    "libhipfile-hipfile.fio",
    "libhipfile-posix.fio",
    "nbd.fio",
    "netio_vsock.fio",
    "netio_vsock_receiver.fio",
    "netio_vsock_sender.fio",
    "nfs.fio",
    "rdmaio-client.fio",
    "rdmaio-server.fio",
    "sequence-distribution.fio",
    "sprandom.fio",
    "uring-cmd-bsg.fio",
    "uring-cmd-fdp.fio",
    "uring-cmd-pi-ext.fio",
    "uring-cmd-pi-sb.fio",
    "uring-cmd-trim-multi-range.fio",
    "uring-cmd-write-mode.fio",
    "uring-cmd-zoned-append.fio",
    "xnvme-compare.fio",
    "xnvme-fdp.fio",
    "xnvme-pi.fio",
    "xnvme-zoned.fio",
];

/// The examples fio accepts that mobistack refuses, each with (a part of) the reason it
/// gives: docs/workloads.md lists them.
const REFUSED: &[(&str, &str)] = &[
    ("basic-verify.fio", "`verify`"),
    ("butterfly.fio", "`flow`"),
    ("cmdprio-bssplit.fio", "`cmdprio_bssplit`"),
    ("cmdprio-percentage.fio", "`cmdprio_percentage`"),
    ("cpp_null.fio", "ioengine=cpp_null: fio's null engine"),
    ("cpuio.fio", "ioengine=cpuio: an engine that burns CPU"),
    ("cross-stripe-verify.fio", "`verify`"),
    ("dev-dax.fio", "ioengine=dev-dax: persistent memory"),
    (
        "dircreate-ioengine.fio",
        "nrfiles=30: a job on several files",
    ),
    (
        "dirdelete-ioengine.fio",
        "ioengine=dirdelete: a file-system operation engine",
    ),
    (
        "dirstat-ioengine.fio",
        "ioengine=dirstat: a file-system operation engine",
    ),
    ("disk-zone-profile.fio", "`zonemode`"),
    (
        "e4defrag.fio",
        "ioengine=e4defrag: a file-system operation engine",
    ),
    (
        "e4defrag2.fio",
        "ioengine=e4defrag: a file-system operation engine",
    ),
    ("enospc-pressure.fio", "`continue_on_error`"),
    (
        "exec.fio",
        "ioengine=exec: an engine that burns CPU or runs a program",
    ),
    ("exitwhat.fio", "`exit_what`"),
    (
        "falloc.fio",
        "ioengine=falloc: a file-system operation engine",
    ),
    (
        "filecreate-ioengine.fio",
        "nrfiles=31250: a job on several files",
    ),
    (
        "filedelete-ioengine.fio",
        "ioengine=filedelete: a file-system operation engine",
    ),
    (
        "filestat-ioengine.fio",
        "ioengine=filestat: a file-system operation engine",
    ),
    ("flow.fio", "`flow_sleep`"),
    (
        "ftruncate.fio",
        "ioengine=ftruncate: a file-system operation engine",
    ),
    (
        "gfapi.fio",
        "ioengine=gfapi: a network or remote-storage engine",
    ),
    ("ime.fio", "`filename_format`"),
    ("latency-profile.fio", "`latency_target`"),
    (
        "libhdfs.fio",
        "ioengine=libhdfs: a network or remote-storage engine",
    ),
    (
        "libiscsi.fio",
        "ioengine=libiscsi: a network or remote-storage engine",
    ),
    ("libpmem.fio", "ioengine=libpmem: persistent memory"),
    ("libzbc-rand-write.fio", "`zonemode`"),
    ("libzbc-seq-read.fio", "`zonemode`"),
    ("mtd.fio", "ioengine=mtd: persistent memory or raw NAND"),
    (
        "netio.fio",
        "ioengine=net: a network or remote-storage engine",
    ),
    (
        "netio_multicast.fio",
        "ioengine=net: a network or remote-storage engine",
    ),
    ("null.fio", "ioengine=null: fio's null engine"),
    ("page_fault.fio", "ioengine=page_fault: an I/O path"),
    (
        "rados.fio",
        "ioengine=rados: a network or remote-storage engine",
    ),
    (
        "rbd.fio",
        "ioengine=rbd: a network or remote-storage engine",
    ),
    ("sg_verify-fail.fio", "ioengine=sg: a passthrough engine"),
    ("sg_verify.fio", "ioengine=sg: a passthrough engine"),
    (
        "sg_write_same_ndob.fio",
        "ioengine=sg: a passthrough engine",
    ),
    ("steadystate.fio", "`ss`"),
    ("surface-scan.fio", "`verify`"),
    (
        "uring-cmd-ng.fio",
        "ioengine=io_uring_cmd: a passthrough engine",
    ),
    (
        "uring-cmd-zoned.fio",
        "ioengine=io_uring_cmd: a passthrough engine",
    ),
    ("zbd-rand-write-trim-gc.fio", "`zonemode`"),
    ("zbd-rand-write-zone-reset-gc.fio", "`zonemode`"),
    ("zbd-rand-write.fio", "`zonemode`"),
    ("zbd-seq-read.fio", "`zonemode`"),
    ("zipf.fio", "ioengine=null: fio's null engine"),
];

/// Virtual time each job may run.
const RUNTIME_CUT_NS: u64 = 20_000_000;

fn examples_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MOBISTACK_FIO_EXAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fio-examples"));
    dir.join("fio-rand-read.fio").exists().then_some(dir)
}

/// Parses and runs one job file as `mobistack fio` does (emmc-5.1, cfq), each job cut to
/// [`RUNTIME_CUT_NS`]; the error if it is refused or fails.
fn run_example(text: &str) -> Result<(), String> {
    let mut jobs = parse_job_file_env(text, &|_| None)?;
    for job in &mut jobs {
        job.runtime = Some(job.runtime.unwrap_or(u64::MAX).min(RUNTIME_CUT_NS));
    }
    let config = mobistack::dev::DeviceConfig {
        profile: "emmc-5.1".to_string(),
        ..Default::default()
    };
    let device = mobistack::dev::build_device(&config, 1)?;
    run_fio_classified(&jobs, device, "cfq", FioOptions::default())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn fios_examples_run_unchanged_or_are_refused_with_the_reason() {
    let Some(dir) = examples_dir() else {
        assert!(
            std::env::var_os("MOBISTACK_REQUIRE_FIO_EXAMPLES").is_none(),
            "fio's examples are missing: run scripts/fetch-fio-examples.sh"
        );
        eprintln!("skipped: fio's examples are not fetched (scripts/fetch-fio-examples.sh)");
        return;
    };
    let mut ran = Vec::new();
    let mut surprises = Vec::new();
    for name in ACCEPTED_BY_FIO {
        let text = std::fs::read_to_string(dir.join(name)).expect("an example");
        let result = run_example(&text);
        let expected = REFUSED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, why)| *why);
        match (&result, expected) {
            (Ok(()), None) => ran.push(name),
            (Err(error), Some(why)) if error.contains(why) => {}
            (Ok(()), Some(why)) => {
                surprises.push(format!("{name}: runs, but listed as refused ({why})"))
            }
            (Err(error), _) => surprises.push(format!("{name}: {error}")),
        }
    }
    for name in REFUSED_BY_FIO {
        let text = std::fs::read_to_string(dir.join(name)).expect("an example");
        if run_example(&text).is_ok() {
            surprises.push(format!("{name}: fio 3.33 refuses it, mobistack runs it"));
        }
    }
    eprintln!(
        "{} of {} examples fio accepts run unchanged",
        ran.len(),
        ACCEPTED_BY_FIO.len()
    );
    assert!(surprises.is_empty(), "{}", surprises.join("\n"));
    assert_eq!(ran.len() + REFUSED.len(), ACCEPTED_BY_FIO.len());
}
