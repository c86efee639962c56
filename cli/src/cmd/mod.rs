//! One module per subcommand.

pub(crate) mod conform;
pub(crate) mod demo;
pub(crate) mod devices;
pub(crate) mod ping;
pub(crate) mod replay;
pub(crate) mod serve;
