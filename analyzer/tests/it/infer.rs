//! infer tests.
