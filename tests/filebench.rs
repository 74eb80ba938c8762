//! `mobistack filebench` from the command line: exit statuses and messages (issue 40).

mod common;
use common::mobistack;

/// Writes `text` to a fresh script file in a directory of its own ([`common::temp_file`]).
fn script(name: &str, text: &str) -> (common::TestDir, String) {
    common::temp_file("filebench-cli", name, name, text)
}

#[test]
fn help_documents_every_option() {
    let (status, out, _) = mobistack(&["filebench", "--help"]);
    assert_eq!(status, 0);
    for option in [
        "--stack",
        "--device",
        "--elevator",
        "--set",
        "--runtime",
        "--seed",
        "--json",
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(option))
            .unwrap_or_else(|| panic!("{option} missing: {out}"));
        // A description follows the option's name and value (not only its default).
        let described = line.split(" [default").next().unwrap_or_default();
        assert!(described.split_whitespace().count() > 2, "{option}: {line}");
    }
}

#[test]
fn a_misspelt_variable_is_bad_input_listing_the_script_s_variables() {
    let (status, out, err) = mobistack(&["filebench", "varmail", "--set", "nfile=10"]);
    assert_eq!(status, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("varmail.f: set `nfile`: the script has no variable `$nfile`")
            && err.contains("$nfiles"),
        "{err}"
    );
}

#[test]
fn a_failing_flowop_prints_its_error_and_exits_1() {
    let (_dir, path) = script(
        "closes.f",
        "define fileset name=fs,path=/tmp,size=4k,entries=10,dirwidth=10,prealloc=100\n\
         define process name=p { thread name=t { flowop closefile name=close1,fd=1 } }\nrun 1\n",
    );
    let (status, out, err) = mobistack(&["filebench", &path]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(out.contains("NO VALID RESULTS"), "{out}");
    assert!(
        err.contains("closes.f:2: flowop close1 failed: attempted to close an already closed fd 1"),
        "{err}"
    );
}

#[test]
fn a_thread_spinning_on_eventlimit_ends_with_the_run() {
    let (_dir, path) = script(
        "spin.f",
        "define fileset name=fs,path=/tmp,size=4k,entries=10,dirwidth=10,prealloc=100\n\
         define process name=p { thread name=t { flowop eventlimit name=e } }\nrun 1\n",
    );
    let (status, out, err) = mobistack(&["filebench", &path]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("1.000: Run took 1 seconds..."), "{out}");
    assert!(out.contains("IO Summary"), "{out}");
}
