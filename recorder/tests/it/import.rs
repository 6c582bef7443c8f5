//! import tests.
