//! `fio`: an app that runs one fio job against the block device of the scenario's stack, with
//! fio's own option names (`[app.workload.fio]` holds `rw = "randread"`, `bs = "4k"`,
//! `iodepth = 32`, ...; see `block::fio` for the supported subset). Direct I/O only: the bios go
//! straight to the block layer, tagged with the app's UID and foreground state. Each completed I/O
//! is one `read`, `write` or `trim` operation in the app's results.

use crate::app::AppContext;
use crate::block::fio::{job_from_options, FioJob, IoHooks, JobState};
use crate::dev::IoOp;
use crate::report::recorder::OpTimer;
use crate::sim::TaskId;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// fio options as written in the scenario: strings, integers or booleans.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct FioWorkloadConfig {
    pub options: BTreeMap<String, toml::Value>,
}

impl FioWorkloadConfig {
    /// The job, named after the app; errors use fio's option names.
    pub fn job(&self, app: &str) -> Result<FioJob, String> {
        let mut pairs = Vec::with_capacity(self.options.len());
        for (option, value) in &self.options {
            let value = match value {
                toml::Value::String(text) => Some(text.clone()),
                toml::Value::Integer(n) => Some(n.to_string()),
                toml::Value::Float(x) => Some(x.to_string()),
                // `time_based = true` is fio's bare `time_based`.
                toml::Value::Boolean(true) => None,
                toml::Value::Boolean(false) => Some("0".to_string()),
                other => {
                    return Err(format!(
                        "fio option `{option}`: expected a string, number or boolean, not {}",
                        other.type_str()
                    ))
                }
            };
            pairs.push((option.clone(), value));
        }
        job_from_options(app, &pairs).map_err(|e| format!("[app.workload.fio]: {e}"))
    }
}

/// Records each I/O as an operation of the app and tags bios with its foreground state.
struct AppHooks {
    ctx: AppContext,
    timer: RefCell<Option<OpTimer>>,
}

impl IoHooks for AppHooks {
    fn foreground(&self) -> bool {
        self.ctx.stack.activity.is_foreground(self.ctx.uid)
    }
    fn started(&self, op: IoOp) {
        *self.timer.borrow_mut() = Some(self.ctx.begin_op(op_name(op)));
    }
    fn finished(&self, _op: IoOp, bytes: u64) {
        let timer = self.timer.borrow_mut().take().expect("an I/O was started");
        self.ctx.end_op(timer);
        self.ctx.add_counter("bytes", bytes);
    }
}

/// The operation an I/O is recorded as.
fn op_name(op: IoOp) -> &'static str {
    match op {
        IoOp::Read => "read",
        IoOp::Write => "write",
        IoOp::Discard => "trim",
        IoOp::Flush => "flush",
    }
}

/// Starts the app's job clones; returns their tasks.
pub fn start(ctx: &AppContext, config: &FioWorkloadConfig) -> Result<Vec<TaskId>, String> {
    let block = ctx
        .stack
        .block
        .as_ref()
        .expect("the stack has a block layer when an app runs fio");
    let job = config.job(&ctx.name)?;
    let mut tasks = Vec::new();
    for clone in 0..job.numjobs {
        let name = if job.numjobs > 1 {
            format!("{}.{clone}", ctx.name)
        } else {
            ctx.name.to_string()
        };
        let rng = ctx.sim.rng(&format!("fio/{name}"));
        let state = Rc::new(JobState::new(
            FioJob {
                name,
                ..job.clone()
            },
            ctx.stack.alloc_pid(),
            ctx.uid,
            &ctx.name,
            block.capacity_bytes,
            rng,
        )?);
        let handles = state.spawn(&ctx.sim, &block.layer, &block.next_bio, |_| {
            Rc::new(AppHooks {
                ctx: ctx.clone(),
                timer: RefCell::new(None),
            })
        });
        tasks.extend(handles.iter().map(|h| h.task()));
    }
    Ok(tasks)
}
