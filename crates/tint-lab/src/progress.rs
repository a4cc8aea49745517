//! Progress of a long run on the terminal: a bar with an ETA when stderr is a terminal, and a line
//! with the count, the elapsed time and the ETA every [`Progress::LINE_EVERY`] (and at the end)
//! when it is not (piped into a log). The experiments' front end (`cargo xtask eval`, `eval cgt`)
//! draws every library's progress events with it.

// Writing progress to stderr is this module's job (libraries elsewhere report through events).
#![allow(clippy::print_stderr)]

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of one section of work: a bar with an ETA on a terminal, and a line every
/// [`Progress::LINE_EVERY`] (and at the end) when stderr is not a terminal (piped or logged).
pub struct Progress {
    name: String,
    bar: ProgressBar,
    start: Instant,
    last_line: std::cell::Cell<Option<Instant>>,
    /// Units already done before this process worked on any (a resumed run): `done − 1` of the
    /// first update, so the ETA counts only the time spent on units done now.
    done_before: std::cell::Cell<Option<usize>>,
}

impl Progress {
    /// Seconds between lines when the output is piped.
    pub const LINE_EVERY: Duration = Duration::from_secs(20);

    /// A section named `name` (shown in front of every line).
    pub fn new(name: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template(
                "{prefix} {bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}",
            )
            .expect("valid template"),
        );
        bar.set_prefix(name.to_string());
        Self {
            name: name.to_string(),
            bar,
            start: Instant::now(),
            last_line: std::cell::Cell::new(None),
            done_before: std::cell::Cell::new(None),
        }
    }

    /// `done` of `total` units finished; `message` says what.
    pub fn update(&self, done: usize, total: usize, message: &str) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        self.bar.set_message(message.to_string());
        let done_before = match self.done_before.get() {
            Some(before) => before,
            None => {
                let before = done.saturating_sub(1);
                self.done_before.set(Some(before));
                before
            }
        };
        if !self.bar.is_hidden() {
            return;
        }
        let due = self
            .last_line
            .get()
            .is_none_or(|t| t.elapsed() >= Self::LINE_EVERY);
        if due || done == total {
            self.last_line.set(Some(Instant::now()));
            let elapsed = self.start.elapsed().as_secs_f64();
            let eta = match eta_seconds(elapsed, done, done_before, total) {
                Some(eta) => format!("{eta:.0} s"),
                None => "?".into(),
            };
            eprintln!(
                "[{}] {done}/{total} ({:.0} %), {elapsed:.0} s elapsed, ETA {eta}: {message}",
                self.name,
                100.0 * done as f64 / total.max(1) as f64
            );
        }
    }

    /// A line that stays (printed above the bar, or as is when piped).
    pub fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("[{}] {line}", self.name);
        } else {
            self.bar.println(format!("[{}] {line}", self.name));
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Seconds left for `total − done` units at the rate of the units done in `elapsed` seconds, i.e.
/// `done − done_before` (units finished by an earlier, resumed run cost no time now); `None`
/// before any unit was done now.
pub fn eta_seconds(elapsed: f64, done: usize, done_before: usize, total: usize) -> Option<f64> {
    let done_now = done.checked_sub(done_before).filter(|&n| n > 0)?;
    Some(elapsed / done_now as f64 * total.saturating_sub(done) as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_eta_counts_only_units_done_now() {
        // A fresh run: 10 of 100 units in 20 s leave 180 s.
        assert_eq!(super::eta_seconds(20.0, 10, 0, 100), Some(180.0));
        // Resumed at 90 units: 5 more in 10 s leave 10 s, not
        // the 0.6 s that counting the resumed units as done in those 10 s would give.
        assert_eq!(super::eta_seconds(10.0, 95, 90, 100), Some(10.0));
        assert_eq!(super::eta_seconds(5.0, 90, 90, 100), None);
    }
}
