//! spm tests.
