//! Progress of a long run, as events for the front end to draw (libraries do not print).

/// What a run reports while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// `done` of `total` units (tuning examples or blocks, evaluated blocks or examples) finished;
    /// `message` says what is being computed.
    Progress {
        /// Units finished.
        done: usize,
        /// Units in the whole run.
        total: usize,
        /// What is being computed.
        message: String,
    },
    /// A line worth keeping (a tuning choice, a reused or recomputed cell, a skipped format).
    Note(String),
}

/// The callback that receives a run's [`RunEvent`]s.
pub type OnEvent<'a> = &'a mut dyn FnMut(RunEvent);
