//! executor tests.
