//! One module per subcommand.

pub(crate) mod conform;
pub(crate) mod replay;
