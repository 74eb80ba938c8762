//! Whole runs of small scripts on a small stack.

use super::*;

fn options(seed: u64) -> RunFileOptions {
    let stack: StackConfig = toml::from_str(
        "[device]\nprofile = \"sata-ssd\"\ncapacity = \"1GiB\"\n[block]\nelevator = \"deadline\"\n",
    )
    .unwrap();
    RunFileOptions {
        seed,
        stack,
        overrides: BTreeMap::new(),
        runtime: None,
    }
}

fn small(name: &str, vars: &[(&str, &str)], seconds: u64, seed: u64) -> FilebenchReport {
    let mut options = options(seed);
    for (var, value) in vars {
        options
            .overrides
            .insert(var.to_string(), override_value(value));
    }
    options.runtime = Some(seconds);
    let text = builtin(name).unwrap();
    run_file(&format!("{name}.f"), text, &options).unwrap()
}

#[test]
fn varmail_runs_and_prints_filebench_s_summary_deterministically() {
    let vars = [("nfiles", "100"), ("nthreads", "4")];
    let report = small("varmail", &vars, 2, 1);
    assert_eq!(report.error, None, "{:#?}", report.log);
    let result = report.result.as_ref().unwrap();
    assert!(result.io.count > 100, "{result:?}");
    assert_eq!(result.elapsed_ns(), 2 * NS_PER_SEC);
    for name in ["deletefile1", "createfile2", "fsyncfile2", "readfile4"] {
        assert!(result.flowop(name).unwrap().count > 0, "{name}: {result:?}");
    }
    let log = report.log.join("\n");
    assert!(
        log.contains("Varmail Version 3.0 personality successfully loaded"),
        "{log}"
    );
    assert!(log.contains("bigfileset populated: 100 files"), "{log}");
    assert!(log.contains("Per-Operation Breakdown"), "{log}");
    assert!(log.contains("IO Summary:"), "{log}");
    // fsync reaches the device: the run wrote.
    assert!(report.counters["block.requests"] > 0);
    let again = small("varmail", &vars, 2, 1);
    assert_eq!(again.log, report.log);
    let other = small("varmail", &vars, 2, 2);
    assert_ne!(other.log, report.log);
}

#[test]
fn varmail_s_fsyncs_wrap_a_small_journal_under_cfq() {
    // 64 MiB of ext4 (a 4 MiB journal): varmail's fsyncs fill the log within two seconds, and
    // the commit thread's tail update and a task's in log_wait_for_space used to both free
    // the same transactions' log blocks (an invariant failure in jbd2's checkpoint).
    let stack: StackConfig = toml::from_str(
        "[device]\nprofile = \"sata-ssd\"\ncapacity = \"64MiB\"\n[block]\nelevator = \"cfq\"\n",
    )
    .unwrap();
    let mut options = options(1);
    options.stack = stack;
    options.runtime = Some(2);
    options
        .overrides
        .insert("nfiles".into(), override_value("100"));
    let report = run_file("varmail.f", builtin("varmail").unwrap(), &options).unwrap();
    assert_eq!(report.error, None, "{:#?}", report.log);
    assert!(report.counters["jbd2.checkpoints"] + report.counters["jbd2.commits"] > 0);
}

#[test]
fn every_shipped_personality_loads() {
    for (name, text) in BUILTIN {
        let workload = script::load(name, text, &BTreeMap::new(), None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(workload.run, script::RunKind::Run(60), "{name}");
    }
}

const CREATE_ONLY: &str = "
set $nthreads=3
define fileset name=set,path=/data,size=4k,entries=2,dirwidth=10,prealloc=100
define process name=p,instances=1
{
  thread name=t,memsize=1m,instances=$nthreads
  {
    flowop createfile name=create1,filesetname=set,fd=1
    flowop closefile name=close1,fd=1
  }
}
run 5
";

#[test]
fn a_flowop_without_a_file_stops_the_run_unless_the_mode_says_otherwise() {
    // Every file exists: createfile cannot obtain one.
    let report = run_file("c.f", CREATE_ONLY, &options(1)).unwrap();
    assert!(report.result.is_none());
    let error = report.error.unwrap();
    assert!(
        error.contains("Run stopped early") && error.contains("create1"),
        "{error}"
    );
    assert!(report.log.iter().any(|l| l.contains("NO VALID RESULTS")));
    let firstdone = format!("set mode quit firstdone\n{CREATE_ONLY}");
    let report = run_file("c.f", &firstdone, &options(1)).unwrap();
    assert_eq!(report.error, None);
    // The master notices at its next one-second tick.
    assert_eq!(report.result.unwrap().elapsed_ns(), NS_PER_SEC);
}

#[test]
fn eventgen_paces_eventlimit_and_finishoncount_ends_threads() {
    let text = "
eventgen rate=100
set mode quit alldone
define fileset name=set,path=/data,size=4k,entries=20,dirwidth=10,prealloc=100
define process name=p,instances=1
{
  thread name=t,memsize=1m,instances=2
  {
    flowop eventlimit name=pace
    flowop statfile name=stat1,filesetname=set
    flowop finishoncount name=done,value=150
  }
}
run 30
";
    let report = run_file("e.f", text, &options(1)).unwrap();
    assert_eq!(report.error, None, "{:#?}", report.log);
    let result = report.result.unwrap();
    // 100 events/s shared by both threads: 150 stats take about 1.5 s; the master ends the
    // run at the second after every thread finished.
    let stats = result.flowop("stat1").unwrap().count;
    assert!((150..=152).contains(&stats), "{stats}");
    assert_eq!(result.elapsed_ns(), 2 * NS_PER_SEC);
}

#[test]
fn script_mistakes_are_errors_with_file_and_line() {
    let text = "define fileset name=set,path=/d,size=4k,entries=2,dirwidth=10\ndefine process name=p\n{\n thread name=t\n {\n  flowop makedir name=m,filesetname=set\n }\n}\nrun 1\n";
    let error = run_file("bad.f", text, &options(1)).unwrap_err();
    assert!(
        error.starts_with("bad.f:6:") && error.contains("makedir"),
        "{error}"
    );
    let error = run_file("bad.f", "set $x=1\nrun 1\n", &options(1)).unwrap_err();
    assert!(error.contains("no process"), "{error}");
    let text = "define fileset name=set,path=/d,size=$nosuch,entries=2,dirwidth=10\nrun 1\n";
    let error = run_file("bad.f", text, &options(1)).unwrap_err();
    assert!(
        error.contains("bad.f:1:") && error.contains("$nosuch"),
        "{error}"
    );
    let error = run_file("bad.f", "set $x=1\n", &options(1)).unwrap_err();
    assert!(error.contains("no run command"), "{error}");
    // A fileset larger than the device (videoserver.f's 10 GB videos on 1 GiB) names the line
    // that defined it.
    let text = "set $x=1\ndefine fileset name=vids,path=/d,size=600m,entries=2,dirwidth=4,prealloc\ndefine process name=p\n{\n thread name=t\n {\n  flowop statfile name=st,filesetname=vids\n }\n}\nrun 1\n";
    let error = run_file("vids.f", text, &options(1)).unwrap_err();
    assert!(
        error.starts_with("vids.f:2: fileset `vids`") && error.contains("ENOSPC"),
        "{error}"
    );
}

#[test]
fn a_scenario_app_runs_a_personality_with_its_threads_as_tasks() {
    let source = r#"
name = "fb"
end = "apps-done"
[stack.device]
profile = "sata-ssd"
capacity = "1GiB"
[[app]]
name = "mail"
[app.workload.filebench]
file = "varmail"
runtime = "2s"
set = { nfiles = 50, nthreads = 3, dir = "/data" }
"#;
    let scenario = crate::scenario::parse("fb.toml", source).unwrap();
    let results = crate::run::run_scenario(&scenario, &Default::default()).unwrap();
    let app = &results.runs[0].apps["mail"];
    assert!(app.counters["filebench.ops"] > 50, "{:?}", app.counters);
    assert_eq!(app.counters["filebench.run_ns"], 2 * NS_PER_SEC);
    assert!(app.ops["fsyncfile2"].count > 0, "{:?}", app.ops.keys());
    // A mistake in the script is a scenario error naming the script's line.
    let bad = source.replace("nfiles = 50", "nfiles = \"many\"");
    let error = crate::scenario::parse("fb.toml", &bad)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("varmail.f:") && error.contains("many"),
        "{error}"
    );
}

const COMPOSITE: &str = "
set $count=3
define fileset name=a,path=/data,size=4k,entries=50,dirwidth=100,prealloc=100
define fileset name=b,path=/data,size=4k,entries=50,dirwidth=100,prealloc=100
define flowop name=readone, $set
{
  flowop openfile name=open,filesetname=$set,fd=1
  flowop readwholefile name=read,fd=1,iosize=4k
  flowop closefile name=close,fd=1
  flowop deletefile name=delete,fd=1
}
define flowop name=work, $which, $n=2
{
  flowop readone name=r, iters=$n, $set=$which
  flowop statfile name=stat,filesetname=$which
}
define process name=p
{
  thread name=t
  {
    flowop work name=w1, $which=a
    flowop work name=w2, iters=$count, $which=b, $n=1
    flowop finishoncount name=done,value=40
  }
}
set mode quit alldone
run 10
";

#[test]
fn composite_flowops_run_their_inner_flowops_with_local_variables() {
    let report = run_file("comp.f", COMPOSITE, &options(1)).unwrap();
    assert_eq!(report.error, None, "{:#?}", report.log);
    let result = report.result.unwrap();
    let count = |name: &str| result.flowop(name).map_or(0, |f| f.count);
    // Per pass of the thread: w1 reads 2 files of `a`, w2 3 x 1 file of `b`.
    let passes = count("w1.stat");
    assert!(passes > 0);
    assert_eq!(count("w1.r.read"), 2 * passes);
    assert_eq!(count("w2.r.read"), 3 * passes);
    assert_eq!(count("w2.stat"), 3 * passes);
    // The composites keep no statistics of their own, as in filebench.
    assert_eq!((count("w1"), count("w1.r")), (0, 0));
    // `deletefile fd=1` after `closefile fd=1` deletes the file read (tf_fse is kept).
    assert_eq!(count("w1.r.delete"), count("w1.r.read"));
    let log = report.log.join("\n");
    assert!(log.contains("w2.r.open"), "{log}");
    // Mistakes name the line.
    let unbound = COMPOSITE.replace("$which=a", "$nosuch=a");
    let error = run_file("comp.f", &unbound, &options(1)).unwrap_err();
    assert!(
        error.starts_with("comp.f:21:") && error.contains("$nosuch"),
        "{error}"
    );
    let missing = COMPOSITE.replace("flowop work name=w1, $which=a", "flowop work name=w1");
    let error = run_file("comp.f", &missing, &options(1)).unwrap_err();
    assert!(
        error.contains("comp.f:") && error.contains("`$which`"),
        "{error}"
    );
    let recursive = "define flowop name=x\n{\n flowop x name=again\n}\ndefine process name=p\n{\n thread name=t\n {\n  flowop x name=x1\n }\n}\nrun 1\n";
    let error = run_file("rec.f", recursive, &options(1)).unwrap_err();
    assert!(error.contains("nest deeper"), "{error}");
}

#[test]
fn absurd_numbers_are_errors_not_panics() {
    let process = "define fileset name=s,path=/d,size=4k,entries=2,dirwidth=10,prealloc\ndefine process name=p,instances=10000\n{\n thread name=t,instances=10000\n {\n  flowop statfile name=st,filesetname=s\n }\n}\n";
    let error = run_file("big.f", &format!("{process}run 1\n"), &options(1)).unwrap_err();
    assert!(error.contains("thread instances"), "{error}");
    let small = process.replace("10000", "1");
    for tail in [
        "run 99999999999\n",
        "sleep 99999999999\nrun 1\n",
        "psrun 1 99999999999\n",
    ] {
        let error = run_file("t.f", &format!("{small}{tail}"), &options(1)).unwrap_err();
        assert!(
            error.contains("at most") || error.contains("0..="),
            "{tail}: {error}"
        );
    }
}

mod fuzz {
    use super::super::script;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any text, and any mangling of a personality, is a value or an error, never a panic.
        #[test]
        fn loading_never_panics(text in "[ -~\n]{0,200}", cut in 0usize..2000, junk in "[ -~]{0,12}") {
            let _ = script::load("fuzz.f", &text, &BTreeMap::new(), Some(1));
            let base = super::builtin("webserver").unwrap();
            let cut = cut.min(base.len());
            let mangled = format!("{}{junk}{}", &base[..cut], &base[cut..]);
            let _ = script::load("fuzz.f", &mangled, &BTreeMap::new(), Some(1));
        }
    }
}

/// A stack whose system call costs 100 us, so that a flowop-bound thread loops 10,000 times a
/// second (fast in a debug build).
fn slow_cpu_options() -> RunFileOptions {
    let mut options = options(1);
    options.stack.cpu.syscall = 100_000;
    options
}

fn one_flowop(flowop: &str, seconds: u64) -> String {
    format!(
        "define fileset name=fs,path=/tmp,size=4k,entries=10,dirwidth=10,prealloc=100\n\
         define process name=p {{ thread name=t {{ flowop {flowop} }} }}\n\
         run {seconds}\n"
    )
}

#[test]
fn a_thread_whose_flowop_does_no_io_spends_cpu_time_and_the_run_ends_on_time() {
    // Issue 40: each of these flowops returns at once (filebench's eventlimit without an
    // event generator, fsyncset with nothing open, a zero delay); the worker loop's own CPU
    // time per flowop advances virtual time, and `run N` ends at N seconds.
    for (flowop, seconds) in [
        ("eventlimit name=e", 1),
        ("fsyncset name=f,filesetname=fs", 1),
        ("delay name=d,value=0", 5),
    ] {
        let report = run_file("spin.f", &one_flowop(flowop, seconds), &slow_cpu_options())
            .unwrap_or_else(|e| panic!("{flowop}: {e}"));
        assert_eq!(report.error, None, "{flowop}: {:#?}", report.log);
        let result = report.result.unwrap();
        assert_eq!(result.elapsed_ns(), seconds * NS_PER_SEC, "{flowop}");
        assert!(report.virtual_ns < (seconds + 2) * NS_PER_SEC, "{flowop}");
    }
    // A delay counts one operation per pass: one per 100 us of the loop's CPU time.
    let report = run_file(
        "d.f",
        &one_flowop("delay name=d,value=0", 1),
        &slow_cpu_options(),
    )
    .unwrap();
    let delays = report.result.unwrap().flowop("d").unwrap().count;
    assert!((9_000..=10_000).contains(&delays), "{delays}");
}

#[test]
fn with_free_system_calls_a_spinning_thread_is_a_livelock_error_not_a_hang() {
    let mut options = options(1);
    options.stack.cpu.syscall = 0;
    let report = run_file("spin.f", &one_flowop("eventlimit name=e", 1), &options).unwrap();
    let error = report.error.unwrap();
    assert!(
        error.contains("could not finish") && error.contains("livelock"),
        "{error}"
    );
}

#[test]
fn setting_a_variable_the_script_does_not_have_is_an_error_listing_its_variables() {
    let mut options = options(1);
    options
        .overrides
        .insert("nfile".into(), override_value("10"));
    let error = run_file("varmail.f", builtin("varmail").unwrap(), &options).unwrap_err();
    assert!(
        error.starts_with("varmail.f: set `nfile`: the script has no variable `$nfile`;")
            && error.contains("$nfiles")
            && error.contains("$nthreads"),
        "{error}"
    );
    // In a scenario: the app's table and the script are named.
    let source = "name = \"fb\"\nduration = \"1s\"\n[[app]]\nname = \"mail\"\n[app.workload.filebench]\nfile = \"varmail\"\nset = { nfile = 10 }\n";
    let error = crate::scenario::parse("fb.toml", source)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("fb.toml:") && error.contains("varmail.f: set `nfile`"),
        "{error}"
    );
    // A variable the script only reads (set from outside) can be set.
    let text = one_flowop("delay name=d,value=$pause", 1);
    let mut options = slow_cpu_options();
    options
        .overrides
        .insert("pause".into(), override_value("0"));
    assert_eq!(run_file("p.f", &text, &options).unwrap().error, None);
}

#[test]
fn a_failing_flowop_stops_the_scenario_app_naming_the_flowop_and_the_error() {
    let dir = std::env::temp_dir().join(format!("mobistack-fb-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("closes.f");
    // closefile on a descriptor never opened: FILEBENCH_ERROR in flowoplib_closefile.
    std::fs::write(&script, one_flowop("closefile name=close1,fd=1", 5)).unwrap();
    let source = format!(
        "name = \"fb\"\nduration = \"3s\"\n[stack.device]\nprofile = \"sata-ssd\"\ncapacity = \"1GiB\"\n\
         [[app]]\nname = \"bench\"\n[app.workload.filebench]\nfile = \"{}\"\n",
        script.display()
    );
    let scenario = crate::scenario::parse("fb.toml", &source).unwrap();
    let results = crate::run::run_scenario(&scenario, &Default::default()).unwrap();
    let failure = results.runs[0].apps["bench"].failure.clone().unwrap();
    assert!(
        failure.message.contains("flowop close1 failed") && failure.message.contains("closed fd 1"),
        "{failure:?}"
    );
    assert!(failure.task.contains("p.0/t.0"), "{failure:?}");
    // The command line prints it as the run's error.
    let report = run_file(
        "closes.f",
        &one_flowop("closefile name=close1,fd=1", 1),
        &options(1),
    )
    .unwrap();
    let error = report.error.unwrap();
    assert!(
        error.contains("closes.f:2: flowop close1 failed"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_command_returns_at_the_end_of_the_run_whatever_the_threads_do() {
    // A thread asleep in a long delay or on a long hog is shut down with the run, as
    // filebench kills its workers.
    for flowop in [
        "delay name=d,value=100000",
        "hog name=h,value=1000000000000",
    ] {
        let report = run_file("long.f", &one_flowop(flowop, 1), &options(1)).unwrap();
        assert_eq!(report.error, None, "{flowop}");
        assert_eq!(report.result.unwrap().elapsed_ns(), NS_PER_SEC);
        assert!(
            report.virtual_ns <= 2 * NS_PER_SEC,
            "{flowop}: {}",
            report.virtual_ns
        );
    }
}

#[test]
fn edge_values_run_to_an_end_or_fail_with_a_message() {
    let fileset =
        |attrs: &str| format!("define fileset name=fs,path=/d,dirwidth=10,prealloc=100,{attrs}\n");
    let cases = [
        // Empty files read whole: no bytes, no error.
        (
            fileset("size=0,entries=4"),
            "readwholefile name=r,filesetname=fs",
            None,
        ),
        // A read of 0 bytes: filebench's "zero iosize".
        (
            fileset("size=4k,entries=4"),
            "read name=r,filesetname=fs,iosize=0",
            Some("zero iosize"),
        ),
        // No files, one leaf directory: nothing to open.
        (
            fileset("size=4k,entries=0,leafdirs=1"),
            "openfile name=o,filesetname=fs",
            Some("could not obtain a file"),
        ),
        // A flowop never executed (iters=0): the loop still turns.
        (
            fileset("size=4k,entries=4"),
            "statfile name=s,filesetname=fs,iters=0",
            None,
        ),
    ];
    for (fileset, flowop, expected) in cases {
        let text = format!(
            "{fileset}define process name=p {{ thread name=t {{ flowop {flowop} }} }}\nrun 1\n"
        );
        let report = run_file("edge.f", &text, &slow_cpu_options())
            .unwrap_or_else(|e| panic!("{flowop}: {e}"));
        match expected {
            None => assert_eq!(report.error, None, "{flowop}: {:#?}", report.log),
            Some(text) => {
                let error = report.error.unwrap_or_default();
                assert!(error.contains(text), "{flowop}: {error}");
            }
        }
        assert!(report.virtual_ns <= 2 * NS_PER_SEC, "{flowop}");
    }
    // A composite of a huge iteration count stops with the run.
    let text = "define fileset name=fs,path=/d,size=4k,entries=4,dirwidth=10,prealloc=100\n\
                define flowop name=many\n{\n flowop statfile name=s,filesetname=fs\n}\n\
                define process name=p { thread name=t { flowop many name=m,iters=1000000000000 } }\nrun 1\n";
    let report = run_file("many.f", text, &slow_cpu_options()).unwrap();
    assert_eq!(report.error, None, "{:#?}", report.log);
    assert!(report.virtual_ns <= 2 * NS_PER_SEC);
}
