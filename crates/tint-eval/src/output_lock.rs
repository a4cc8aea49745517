//! [`OutputLock`]: one run at a time per report file. Two runs writing one `--out` (say two
//! `--resume` runs with different methods) would each rewrite the report from their own cells and
//! the file would keep one run's; the second run is refused instead. The lock is an advisory
//! `flock` on `OUT.lock`, released when the run ends or its process dies (a killed run leaves no
//! stale lock behind).

use std::path::{Path, PathBuf};

use tint_assets::{ExclusiveLock, LockError};

use crate::EvalError;

/// Holds the lock on a report's output for as long as it lives.
#[derive(Debug)]
pub struct OutputLock {
    _lock: ExclusiveLock,
}

impl OutputLock {
    /// Takes the lock of the report `out` (the file `OUT.lock` next to it, creating `out`'s
    /// directory).
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] naming `--out` when another run holds the lock;
    /// [`EvalError::Io`] naming the lock file when it cannot be opened or locked.
    pub fn acquire(out: &Path) -> Result<Self, EvalError> {
        let path = PathBuf::from(format!("{}.lock", out.display()));
        match ExclusiveLock::acquire(&path) {
            Ok(lock) => Ok(Self { _lock: lock }),
            Err(LockError::Held { .. }) => Err(EvalError::InvalidSetting {
                name: "--out",
                value: out.display().to_string(),
                rule: "another run is writing this report (it holds OUT.lock); wait for it to \
                       finish or give another --out"
                    .into(),
            }),
            Err(LockError::Io {
                operation,
                path,
                source,
            }) => Err(EvalError::Io {
                operation,
                path,
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_on_one_output_is_refused_until_the_first_ends() {
        let dir = std::env::temp_dir().join(format!("tint-lock-{}", std::process::id()));
        let out = dir.join("nested/lm.json");
        let first = OutputLock::acquire(&out).unwrap();
        let err = OutputLock::acquire(&out).unwrap_err().to_string();
        assert!(
            err.contains("--out") && err.contains("lm.json") && err.contains("another run"),
            "{err}"
        );
        // Another report is not locked.
        let other = OutputLock::acquire(&dir.join("icl.json")).unwrap();
        drop(first);
        assert!(
            !dir.join("nested/lm.json.lock").exists(),
            "removed at the end"
        );
        let again = OutputLock::acquire(&out).unwrap();
        drop((again, other));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
