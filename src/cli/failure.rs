//! Library errors of the pipeline as failures a person can act on: the message names the
//! store, the hint says what to do next, the exit code follows the error.

use chainweaver::Error;

use super::{Failure, Global, exit};

/// The failure a pipeline error becomes.
pub fn library(err: Error, global: &Global) -> anyhow::Error {
    let store = global.store.display();
    let (message, hint) = match &err {
        Error::NothingToMine { held_out: 0 } => (
            format!("the store {store} holds no traces with tool calls"),
            Some("import some first: `chainweaver import FILE`".to_string()),
        ),
        Error::NothingToMine { .. } => (format!("{err} in {store}"), Some("lower --holdout".into())),
        Error::NoCandidates => (
            format!("no candidates in {store} to verify"),
            Some(
                "`chainweaver analyze FILE` imports, mines and verifies in one go; or `chainweaver mine --holdout 20` first".into(),
            ),
        ),
        Error::UnknownCandidate { wanted, stored } => (
            format!("no candidate `{wanted}` in {store}"),
            Some(if *stored == 0 {
                "run `chainweaver mine` first".to_string()
            } else {
                "`chainweaver candidates list` shows the candidates and their ranks".to_string()
            }),
        ),
        _ => (err.to_string(), None),
    };
    Failure {
        code: exit::FAILED,
        message,
        hint,
    }
    .into()
}
