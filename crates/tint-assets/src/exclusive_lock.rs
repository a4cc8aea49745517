//! [`ExclusiveLock`]: one writer at a time for an output that several runs could write (a report,
//! a checkpoint directory). An advisory `flock` on a lock file, released when its holder drops it
//! or its process dies (a killed run leaves no stale lock behind); the file is removed on drop.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another holder (this process or another) has the lock.
    #[error("{path} is held by another run")]
    Held {
        /// The lock file.
        path: PathBuf,
    },
    /// The lock file could not be made, opened or locked.
    #[error("cannot {operation} the lock file {path}: {source}")]
    Io {
        /// `create the directory of`, `open` or `lock`.
        operation: &'static str,
        /// The lock file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Holds an exclusive lock on a lock file for as long as it lives.
#[derive(Debug)]
pub struct ExclusiveLock {
    path: PathBuf,
    _file: File,
}

impl ExclusiveLock {
    /// Takes the lock of the file `path` (made with its directory when missing), without
    /// waiting.
    ///
    /// # Errors
    /// [`LockError::Held`] when another holder has it; [`LockError::Io`] naming the file when it
    /// cannot be made, opened or locked.
    pub fn acquire(path: &Path) -> Result<Self, LockError> {
        let io = |operation, source| LockError::Io {
            operation,
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| io("create the directory of", e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| io("open", e))?;
        match file.try_lock() {
            Ok(()) => Ok(Self {
                path: path.to_path_buf(),
                _file: file,
            }),
            Err(TryLockError::WouldBlock) => Err(LockError::Held {
                path: path.to_path_buf(),
            }),
            Err(TryLockError::Error(source)) => Err(io("lock", source)),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ExclusiveLock {
    fn drop(&mut self) {
        // Removed while still locked, so a holder that opens it now makes and locks a new file.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_drops_the_lock() {
        let dir = std::env::temp_dir().join(format!("tint-exclusive-lock-{}", std::process::id()));
        let path = dir.join("nested/out.lock");
        let first = ExclusiveLock::acquire(&path).unwrap();
        assert_eq!(first.path(), path);
        match ExclusiveLock::acquire(&path) {
            Err(LockError::Held { path: held }) => assert_eq!(held, path),
            other => panic!("expected Held, got {other:?}"),
        }
        let other = ExclusiveLock::acquire(&dir.join("other.lock")).unwrap();
        drop(first);
        assert!(!path.exists(), "removed on drop");
        let again = ExclusiveLock::acquire(&path).unwrap();
        drop((again, other));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_file_that_cannot_be_made_is_an_io_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("tint-exclusive-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A file where the lock's directory should be.
        let blocker = dir.join("file");
        std::fs::write(&blocker, b"x").unwrap();
        let err = ExclusiveLock::acquire(&blocker.join("out.lock"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot create the directory of the lock file")
                && err.contains("out.lock"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
