//! capture tests.
