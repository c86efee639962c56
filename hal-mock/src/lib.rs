//! udah-hal-mock: a deterministic software backend for udah.
//!
//! **Status: skeleton.** The NIC-accurate UD fabric is the subject of its own
//! issue; this crate currently offers only what the core's tests need.
