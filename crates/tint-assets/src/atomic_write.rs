//! Crash-safe output files: every report and result file of the project is written through
//! [`write_atomic`] (or [`write_atomic_with`]), so that a reader, a crash or a full disk never leaves a
//! cut file where a complete one was.
//!
//! The rules (docs/reliability.md, "Atomic writes"):
//! - A regular file (or a new path) is written to a temporary file in the **same directory**
//!   (`.NAME.tmp.PID.N`, created exclusively), flushed, `fsync`ed, then renamed over the target; the
//!   directory is `fsync`ed after the rename. A reader sees the old file or the new one, never a mix.
//! - A **symlink** is written through: the link is resolved (chains included) and the final target is
//!   replaced as above; the link itself stays a link.
//! - A **special file** (character device such as `/dev/null`, FIFO, socket) is written in place
//!   (opened for writing, never truncated, renamed or replaced); a **directory** is refused.
//! - **Modes**: a replaced regular file keeps its permissions; a new file gets `0666 & !umask`
//!   (0644 under the usual umask 022), as `File::create` would give it.
//! - Every failure is an [`AtomicWriteError`] naming the path and the operation, and the temporary
//!   file is removed.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A failed atomic write: the operation, the path it concerned, and the OS error.
#[derive(Debug)]
pub struct AtomicWriteError {
    /// What was being done (`"create temporary file"`, `"rename"`, …).
    pub operation: &'static str,
    /// The file or directory the operation concerned.
    pub path: PathBuf,
    /// The underlying error.
    pub source: io::Error,
}

impl fmt::Display for AtomicWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot {} {}: {}",
            self.operation,
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for AtomicWriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<AtomicWriteError> for io::Error {
    fn from(error: AtomicWriteError) -> Self {
        io::Error::new(error.source.kind(), error.to_string())
    }
}

fn fail<'a>(
    operation: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> AtomicWriteError + 'a {
    move |source| AtomicWriteError {
        operation,
        path: path.to_path_buf(),
        source,
    }
}

/// Most symlinks followed before giving up (as Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Follows `path` through symlinks to the file that a write should change (which may not exist yet).
fn resolve_symlinks(path: &Path) -> Result<PathBuf, AtomicWriteError> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&current).map_err(fail("read symlink", &current))?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(AtomicWriteError {
        operation: "resolve symlinks of",
        path: path.to_path_buf(),
        source: io::Error::other(format!("more than {MAX_SYMLINKS} levels of symlinks")),
    })
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically (see the module documentation for the rules).
///
/// # Errors
/// [`AtomicWriteError`] naming the path and the operation that failed.
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    write_atomic_with(path, |writer| writer.write_all(bytes))
}

/// Writes the output of `fill` to `path` atomically; `fill` gets a buffered writer over the temporary
/// file (or over the special file itself).
///
/// # Errors
/// [`AtomicWriteError`] naming the path and the operation that failed (an error of `fill` is reported
/// as operation `"write"`).
pub fn write_atomic_with(
    path: impl AsRef<Path>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), AtomicWriteError> {
    let requested = path.as_ref();
    let target = resolve_symlinks(requested)?;
    let existing = match fs::metadata(&target) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(fail("inspect", &target)(e)),
    };
    if let Some(meta) = &existing {
        if meta.is_dir() {
            return Err(AtomicWriteError {
                operation: "write",
                path: target,
                source: io::Error::new(io::ErrorKind::IsADirectory, "the path is a directory"),
            });
        }
        if !meta.is_file() {
            // Character/block device, FIFO, socket: write in place, never replace the node.
            let file = OpenOptions::new()
                .write(true)
                .open(&target)
                .map_err(fail("open special file", &target))?;
            let mut writer = io::BufWriter::new(file);
            fill(&mut writer).map_err(fail("write", &target))?;
            writer.flush().map_err(fail("write", &target))?;
            return Ok(());
        }
    }
    let file_name = target.file_name().ok_or_else(|| AtomicWriteError {
        operation: "write",
        path: target.clone(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"),
    })?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        file_name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_temp_and_rename(&tmp, &target, &dir, existing.as_ref(), fill);
    if result.is_err() {
        fs::remove_file(&tmp).ok();
    }
    result
}

fn write_temp_and_rename(
    tmp: &Path,
    target: &Path,
    dir: &Path,
    existing: Option<&fs::Metadata>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), AtomicWriteError> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(fail("create temporary file", tmp))?;
    let mut writer = io::BufWriter::new(file);
    fill(&mut writer).map_err(fail("write", tmp))?;
    let file = writer
        .into_inner()
        .map_err(|e| fail("write", tmp)(e.into_error()))?;
    if let Some(meta) = existing {
        file.set_permissions(meta.permissions())
            .map_err(fail("set permissions of", tmp))?;
    }
    file.sync_all().map_err(fail("fsync", tmp))?;
    drop(file);
    fs::rename(tmp, target).map_err(fail("rename temporary file onto", target))?;
    sync_dir(dir)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), AtomicWriteError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fail("fsync directory", dir))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), AtomicWriteError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tint-atomic-{}-{name}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect()
    }

    #[test]
    fn writes_new_and_replaces_existing_files_without_leftovers() {
        let dir = scratch("plain");
        let path = dir.join("report.json");
        write_atomic(&path, b"first").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        write_atomic(&path, b"second, longer").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second, longer");
        assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
        fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_failing_writer_leaves_the_old_file_intact() {
        let dir = scratch("fail");
        let path = dir.join("report.json");
        write_atomic(&path, b"complete old report").unwrap();
        let err = write_atomic_with(&path, |w| {
            w.write_all(b"half of a new rep")?;
            Err(io::Error::other("disk full (simulated)"))
        })
        .unwrap_err();
        assert_eq!(err.operation, "write");
        assert!(err.to_string().contains("disk full"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"complete old report");
        assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
        fs::remove_dir_all(dir).ok();
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_written_through_and_stay_links() {
        let dir = scratch("link");
        let target = dir.join("real.json");
        fs::write(&target, b"old").unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        let chain = dir.join("chain.json");
        std::os::unix::fs::symlink(&link, &chain).unwrap();
        write_atomic(&chain, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::symlink_metadata(&chain)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // A dangling link creates its target.
        let dangling = dir.join("dangling.json");
        std::os::unix::fs::symlink("created.json", &dangling).unwrap();
        write_atomic(&dangling, b"made").unwrap();
        assert_eq!(fs::read(dir.join("created.json")).unwrap(), b"made");
        assert!(fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        fs::remove_dir_all(dir).ok();
    }

    #[cfg(unix)]
    #[test]
    fn special_files_are_written_in_place_and_directories_refused() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic("/dev/null", b"discarded").unwrap();
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let dir = scratch("dir");
        let err = write_atomic(&dir, b"x").unwrap_err();
        assert_eq!(err.path, dir);
        assert!(err.to_string().contains("directory"), "{err}");
        fs::remove_dir_all(dir).ok();
    }

    #[cfg(unix)]
    #[test]
    fn modes_follow_umask_for_new_files_and_are_kept_for_replaced_ones() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("mode");
        let path = dir.join("new.json");
        write_atomic(&path, b"x").unwrap();
        // What `File::create` gives a new file under this process's umask.
        let reference = dir.join("reference");
        File::create(&reference).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), mode(&reference));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&path, b"y").unwrap();
        assert_eq!(mode(&path), 0o640);
        fs::remove_dir_all(dir).ok();
    }

    #[cfg(unix)]
    #[test]
    fn errors_name_the_path_and_the_operation() {
        let err = write_atomic("/nonexistent-dir-tint/out.json", b"x").unwrap_err();
        assert_eq!(err.operation, "create temporary file");
        let text = err.to_string();
        assert!(
            text.contains("/nonexistent-dir-tint/.out.json.tmp."),
            "{text}"
        );
    }
}
