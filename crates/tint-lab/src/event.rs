//! Progress of a long run, as events for the front end to draw (libraries do not print): the one
//! vocabulary of every experiment (the TinT LM and ICL runs and their default suite, the CGT
//! experiments, the benches) and the one trait that receives it, [`Reporter`].

/// What a run reports while it works.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// A stage of the run starts (a part of the suite, a variant's training, the benchmark's
    /// measurements): the progress events that follow count its units, under this name.
    Stage(String),
    /// `done` of `total` units of the current stage (tuning examples or blocks, evaluated blocks or
    /// examples, training steps, measurements) finished; `message` says what is being computed.
    Progress {
        /// Units finished.
        done: usize,
        /// Units in the whole stage.
        total: usize,
        /// What is being computed.
        message: String,
    },
    /// A line worth keeping (a tuning choice, a reused or recomputed cell, a resumed checkpoint, a
    /// measured time, a warning).
    Note(String),
}

/// The callback that receives a run's [`RunEvent`]s.
pub type OnEvent<'a> = &'a mut dyn FnMut(RunEvent);

/// What receives a run's [`RunEvent`]s: the progress side of every experiment's host (a closure
/// is one). The CGT and benchmark hosts add what their runs ask of the caller besides.
pub trait Reporter {
    /// Receives an event.
    fn event(&mut self, event: RunEvent);
}

impl<F: FnMut(RunEvent)> Reporter for F {
    fn event(&mut self, event: RunEvent) {
        self(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_twice(reporter: &mut dyn Reporter) {
        reporter.event(RunEvent::Stage("a".into()));
        reporter.event(RunEvent::Note("b".into()));
    }

    #[test]
    fn a_closure_is_a_reporter() {
        let mut seen = Vec::new();
        report_twice(&mut |event| seen.push(event));
        assert_eq!(
            seen,
            [RunEvent::Stage("a".into()), RunEvent::Note("b".into())]
        );
    }
}
