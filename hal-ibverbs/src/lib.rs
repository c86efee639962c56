//! udah-hal-ibverbs: the udah backend over real libibverbs.
//!
//! **Status: skeleton.** The verbs backend (devices, ports, GID tables, PDs,
//! AHs, UD QPs through `rdma-mummy-sys`) is the subject of its own issue; this
//! crate does not yet talk to libibverbs.
