//! How a failed command reports its error on stderr.
//!
//! The workspace's error types write their cause into their own message (`"--preset: invalid model
//! config: unknown preset …"`) and also name it as their `source()`, so that a library user who only
//! prints `Display` sees the whole story and one who walks the chain sees each step. anyhow's default
//! report prints the message and then every source under "Caused by", which repeats each embedded
//! cause word for word. This report keeps anyhow's layout but leaves out a cause whose text its
//! parent's message already holds; causes that add something (an `anyhow::Context` line, an error
//! that does not embed its source) are still listed.

use std::backtrace::BacktraceStatus;
use std::fmt::Write as _;

/// The report of `err`: `Error: <message>`, then the causes its message does not already hold under
/// `Caused by:` (numbered when there are several, as anyhow does), then the backtrace when one was
/// captured (`RUST_BACKTRACE=1` or `RUST_LIB_BACKTRACE=1`).
pub(crate) fn render(err: &anyhow::Error) -> String {
    let mut report = format!("Error: {err}");
    let mut parent = err.to_string();
    let mut new_causes = Vec::new();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !parent.contains(&text) {
            new_causes.push(text.clone());
        }
        parent = text;
    }
    match new_causes.as_slice() {
        [] => {}
        [only] => {
            let _ = write!(report, "\n\nCaused by:\n    {only}");
        }
        several => {
            report.push_str("\n\nCaused by:");
            for (index, cause) in several.iter().enumerate() {
                let _ = write!(report, "\n{index:>5}: {cause}");
            }
        }
    }
    let backtrace = err.backtrace();
    if backtrace.status() == BacktraceStatus::Captured {
        let _ = write!(report, "\n\nStack backtrace:\n{backtrace}");
    }
    report
}

#[cfg(test)]
mod tests {
    use super::render;
    use std::fmt;

    /// An error that, like the workspace's, writes its source into its own message.
    #[derive(Debug)]
    struct Embeds(&'static str, Option<Box<Embeds>>);

    impl fmt::Display for Embeds {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match &self.1 {
                Some(source) => write!(f, "{}: {source}", self.0),
                None => f.write_str(self.0),
            }
        }
    }

    impl std::error::Error for Embeds {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    fn chain() -> Embeds {
        Embeds(
            "--preset",
            Some(Box::new(Embeds(
                "invalid model config",
                Some(Box::new(Embeds("unknown preset \"nope\"", None))),
            ))),
        )
    }

    // The backtrace line depends on the environment the tests run in; only the part before it is checked.
    fn without_backtrace(report: &str) -> &str {
        report.split("\n\nStack backtrace:").next().unwrap()
    }

    #[test]
    fn embedded_causes_are_not_repeated() {
        let report = render(&anyhow::Error::new(chain()));
        assert_eq!(
            without_backtrace(&report),
            "Error: --preset: invalid model config: unknown preset \"nope\""
        );
    }

    #[test]
    fn a_context_line_keeps_its_cause() {
        // `.context` does not embed the error it wraps: the cause must still be printed, once.
        let err = anyhow::Error::new(chain()).context("reading runs/cgt/log.jsonl");
        assert_eq!(
            without_backtrace(&render(&err)),
            "Error: reading runs/cgt/log.jsonl\n\nCaused by:\n    \
             --preset: invalid model config: unknown preset \"nope\""
        );
    }

    #[test]
    fn several_new_causes_are_numbered() {
        let err = anyhow::Error::new(Embeds("disk full", None))
            .context("writing the report")
            .context("eval cgt");
        assert_eq!(
            without_backtrace(&render(&err)),
            "Error: eval cgt\n\nCaused by:\n    0: writing the report\n    1: disk full"
        );
    }
}
