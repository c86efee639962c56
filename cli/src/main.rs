//! The udah command.
fn main() {}
