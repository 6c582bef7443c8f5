//! sqlite tests.
