//! Library part of the udah command.
