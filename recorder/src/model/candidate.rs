//! Mined patterns, argument bindings, candidate flows and verdicts.
