//! The state machine wired to the store worker, without a terminal: the terminal shell, the
//! tests and the benchmark all drive the browser through this.

use std::time::Duration;

use chainweaver_recorder::store::TraceStore;
use crossbeam_channel::RecvTimeoutError;

use crate::app::{Action, AppState, Effect, action_for_key, start, update};
use crate::keymap::Key;
use crate::worker::{Response, Worker};

/// Browser state plus the worker answering its queries.
pub struct Browser {
    pub state: AppState,
    worker: Worker,
}

impl Browser {
    /// Start the worker over `store` and send the first queries.
    pub fn new(
        store: Box<dyn TraceStore>,
        store_label: impl Into<String>,
        size: (u16, u16),
    ) -> std::io::Result<Self> {
        let worker = Worker::spawn(store)?;
        let mut browser = Self {
            state: AppState::new(store_label, size),
            worker,
        };
        let effects = start(&mut browser.state);
        browser.dispatch(effects);
        Ok(browser)
    }

    /// Apply an action; queries go to the worker, the other effects are returned.
    pub fn apply(&mut self, action: Action) -> Vec<Effect> {
        let effects = update(&mut self.state, action);
        self.dispatch(effects)
    }

    /// Apply the action a key stands for (nothing when the key means nothing here).
    pub fn key(&mut self, key: Key) -> Vec<Effect> {
        match action_for_key(&self.state, key) {
            Some(action) => self.apply(action),
            None => Vec::new(),
        }
    }

    fn dispatch(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        let mut rest = Vec::new();
        for effect in effects {
            match effect {
                Effect::Query(request) => {
                    if !self.worker.send(request) {
                        self.state.status = Some(crate::app::Status {
                            text: "the store worker stopped; restart the browser".into(),
                            kind: crate::app::StatusKind::Error,
                        });
                    }
                }
                other => rest.push(other),
            }
        }
        rest
    }

    /// The channel store answers arrive on (for `select!` in the terminal loop).
    pub fn responses(&self) -> &crossbeam_channel::Receiver<Response> {
        self.worker.responses()
    }

    /// Wait up to `timeout` for one store answer and apply it. `None` on timeout.
    pub fn pump(&mut self, timeout: Duration) -> Option<Vec<Effect>> {
        match self.worker.responses().recv_timeout(timeout) {
            Ok(response) => Some(self.apply(Action::Loaded(response))),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Apply answers until nothing is awaited any more or `timeout` passes without an answer.
    /// True when everything arrived.
    pub fn settle(&mut self, timeout: Duration) -> bool {
        use crate::worker::Slot;
        let slots = [
            Slot::Traces,
            Slot::Detail,
            Slot::CompareLeft,
            Slot::CompareRight,
            Slot::Tools,
            Slot::Patterns,
            Slot::Candidates,
            Slot::Verdicts,
        ];
        while slots.iter().any(|s| self.state.is_loading(*s)) {
            if self.pump(timeout).is_none() {
                return false;
            }
        }
        true
    }
}
