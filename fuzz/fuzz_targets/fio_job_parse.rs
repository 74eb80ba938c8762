//! The fio job-file parser on arbitrary text, and each job it accepts checked against a device:
//! errors, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match mobistack::workload::fio::parse_job_file(text) {
        Ok(jobs) => {
            for job in &jobs {
                let _ = job.check_region(8 << 30);
                let _ = job.effective_iodepth();
            }
        }
        Err(message) => assert!(message.len() < 4096, "a {}-byte error", message.len()),
    }
});
