//! The `chainweaver` command.

fn main() {}
