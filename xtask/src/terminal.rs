//! The one drawer of every library's progress ([`RunEvent`]s of `eval`, `eval cgt`, `bench`) on
//! stderr: a [`Progress`] per stage (a bar with an ETA on a terminal, lines with the ETA when
//! piped), notes above it or as lines.

use tint_lab::event::{Reporter, RunEvent};
use tint_lab::progress::Progress;

/// Draws a run's events: each [`RunEvent::Stage`] ends the stage before it and starts a new
/// progress display under its name; notes outside a stage are plain lines.
#[derive(Default)]
pub(crate) struct Terminal {
    /// The stage being drawn.
    current: Option<Progress>,
}

impl Terminal {
    /// The stage name of progress that comes before any stage.
    const NO_STAGE: &'static str = "run";

    /// A drawer already in the stage `name` (a run that reports no stages of its own).
    pub(crate) fn in_stage(name: &str) -> Self {
        Self {
            current: Some(Progress::new(name)),
        }
    }

    /// Ends the stage being drawn (removes its bar).
    pub(crate) fn finish(&mut self) {
        if let Some(stage) = self.current.take() {
            stage.finish();
        }
    }
}

impl Reporter for Terminal {
    fn event(&mut self, event: RunEvent) {
        match event {
            RunEvent::Stage(name) => {
                self.finish();
                self.current = Some(Progress::new(&name));
            }
            RunEvent::Progress {
                done,
                total,
                message,
            } => self
                .current
                .get_or_insert_with(|| Progress::new(Self::NO_STAGE))
                .update(done, total, &message),
            RunEvent::Note(line) => match &self.current {
                Some(stage) => stage.note(&line),
                None => eprintln!("{line}"),
            },
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.finish();
    }
}
