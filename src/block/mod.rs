//! The block layer: bios and requests, the request queue (plugging, merging, request allocation
//! limits, dispatch to the device, completion), the elevators, and blktrace output.
//!
//! It sits between the file system (which submits [`request::Bio`]s) and a
//! [`crate::dev::BlockDevice`]. See each submodule's documentation for what it models of Linux and
//! what it simplifies.

pub mod blktrace;
pub mod elevator;
pub mod fio;
pub mod layer;
pub mod queue;
pub mod request;
