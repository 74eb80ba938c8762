//! `mobistack reproduce context-aware` (seed 003, an MS thesis, 2014): Table 7.1's filebench
//! personalities (fileserver, webserver, varmail, webproxy) on the SATA SSD under CFQ and the
//! subregion scheduler, and under today's mq-deadline, BFQ and kyber (the comparison the thesis
//! could not make); then §7.2's video player under IOREAD (the built-in
//! `context-aware/video-ioread`) at 1080p and 320x240: frame latency and late frames under CFQ,
//! the subregion scheduler and its bandwidth reservation. `--quick`: CFQ and the subregion
//! scheduler only, 1080p only.

use super::{run_all, Headline, ReproduceOptions, Reproduction, Statistic, Table, TableRow};
use crate::scenario;

/// Table 7.1: (personality, the thesis's gain of its scheduler over CFQ in ops/s, %).
const TABLE_7_1: [(&str, f64); 4] = [
    ("fileserver", 6.4),
    ("webserver", 0.5),
    ("varmail", 1.8),
    ("webproxy", 25.4),
];

/// The elevators compared: the thesis's two, then today's.
const ELEVATORS: [&str; 5] = ["cfq", "subregion", "mq-deadline", "bfq", "kyber"];

/// One filebench personality on the SATA SSD for 10 s under each of `elevators`.
fn filebench_scenario(personality: &str, elevators: &[&str]) -> String {
    let mut source = format!(
        "name = \"context-aware-{personality}\"\n\
         description = \"seed 003 Table 7.1: filebench {personality} on the SATA SSD\"\n\
         seeds = [1]\n\
         duration = \"12s\"\n\
         [stack.device]\n\
         profile = \"sata-ssd\"\n\
         capacity = \"8GiB\"\n\
         [stack.fs]\n\
         type = \"ext4\"\n\
         [[app]]\n\
         name = \"filebench\"\n\
         role = \"foreground\"\n\
         [app.workload.filebench]\n\
         file = \"{personality}\"\n\
         runtime = \"10s\"\n"
    );
    for elevator in elevators {
        source.push_str(&format!(
            "[[variant]]\nname = \"{elevator}\"\n[variant.stack.block]\nelevator = \"{elevator}\"\n"
        ));
        // Today's schedulers: a mainline block layer over the 3.10 stack (docs/kernels.md).
        if crate::block::BLK_MQ_ELEVATORS.contains(elevator) {
            source.push_str("version = \"mainline\"\n");
        }
    }
    source
}

/// Ops per second of each elevator's run of `personality`.
fn run_filebench(
    personality: &str,
    elevators: &[&str],
    options: &ReproduceOptions,
) -> Result<Vec<f64>, String> {
    let source = filebench_scenario(personality, elevators);
    let s = scenario::parse(&format!("context-aware-{personality}.toml"), &source)
        .map_err(|e| e.to_string())?;
    let runs = run_all(&s, options)?;
    Ok(elevators
        .iter()
        .map(|elevator| {
            runs.get(elevator).apps["filebench"]
                .counters
                .get("filebench.ops_per_s_x1000")
                .map_or(0.0, |&x| x as f64 / 1000.0)
        })
        .collect())
}

/// The video player's rows: (variant, late frames, frames, frame p50 ms, p99 ms, max ms).
fn run_video(bitrate: &str, options: &ReproduceOptions) -> Result<Vec<(String, [f64; 5])>, String> {
    let source = scenario::builtin::find("context-aware/video-ioread")
        .ok_or("no context-aware/video-ioread")?
        .source
        .replace("bitrate = \"1MB/s\"", &format!("bitrate = \"{bitrate}\""));
    let s = scenario::parse("video-ioread.toml", &source).map_err(|e| e.to_string())?;
    let names: Vec<String> = s.variants.iter().map(|v| v.name.clone()).collect();
    let runs = run_all(&s, options)?;
    Ok(names
        .into_iter()
        .map(|name| {
            let app = &runs.get(&name).apps["video"];
            let frame = &app.ops["frame"];
            let values = [
                app.counters.get("late_frames").copied().unwrap_or(0) as f64,
                app.counters.get("frames").copied().unwrap_or(0) as f64,
                frame.p50_ns as f64 / 1e6,
                frame.p99_ns as f64 / 1e6,
                frame.max_ns as f64 / 1e6,
            ];
            (name, values)
        })
        .collect())
}

pub(super) fn context_aware(
    options: &ReproduceOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Reproduction, String> {
    let elevators: &[&str] = if options.quick {
        &ELEVATORS[..2]
    } else {
        &ELEVATORS
    };
    let mut headlines = Vec::new();
    let mut rows = Vec::new();
    for (personality, gain) in TABLE_7_1 {
        progress(&format!(
            "filebench {personality} ({})",
            elevators.join(", ")
        ));
        let ops = run_filebench(personality, elevators, options)?;
        headlines.push(Headline::relative(
            format!("{personality} ops/s, CFQ -> subregion scheduler (SATA SSD)"),
            "Table 7.1",
            "ops/s",
            Statistic::Throughput,
            100.0 + gain,
            (ops[0], ops[1]),
        ));
        rows.push(TableRow {
            label: personality.to_string(),
            values: ops.iter().map(|&v| Some(v)).collect(),
        });
    }
    let mut tables = vec![Table {
        title: "Table 7.1 analogue: filebench ops/s on the SATA SSD (10 s each)".into(),
        note: "thesis: subregion over CFQ +6.4 % fileserver, +0.5 % webserver, +1.8 % varmail, +25.4 % webproxy; mq-deadline, BFQ and kyber are today's (no thesis value)".into(),
        columns: elevators.iter().map(|e| e.to_string()).collect(),
        rows,
    }];
    let bitrates: &[(&str, &str)] = if options.quick {
        &[("1080p", "1MB/s")]
    } else {
        // 1080p at 8 Mbit/s; 320x240 at 384 kbit/s (both assumptions: typical H.264 rates).
        &[("1080p", "1MB/s"), ("320x240", "48kB/s")]
    };
    for (label, bitrate) in bitrates {
        progress(&format!("video {label} under IOREAD"));
        let rows = run_video(bitrate, options)?
            .into_iter()
            .map(|(name, values)| TableRow {
                label: name,
                values: values.iter().map(|&v| Some(v)).collect(),
            })
            .collect();
        tables.push(Table {
            title: format!(
                "Figures 7.2-7.3 analogue: video player ({label}, 30 fps) under IOREAD, SATA SSD"
            ),
            note: "thesis: the player's request latency CDF, CFQ vs its scheduler; late frames (a frame read after the next is due) are the user-visible figure it does not give".into(),
            columns: ["late frames", "frames", "p50 ms", "p99 ms", "max ms"]
                .map(String::from)
                .to_vec(),
            rows,
        });
    }
    Ok(Reproduction::new(
        "context-aware",
        options.quick,
        headlines,
        tables,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_filebench_scenarios_parse_with_one_variant_per_elevator() {
        for (personality, _) in TABLE_7_1 {
            let s = scenario::parse("x.toml", &filebench_scenario(personality, &ELEVATORS))
                .expect("parses");
            let names: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(names, ELEVATORS);
            assert_eq!(s.variants[1].stack.block.elevator, "subregion");
        }
    }
}
