//! Regenerating parts of the markdown reports in `docs/`: each experiment owns a section between
//! `<!-- KEY:begin -->` and `<!-- KEY:end -->` markers and rewrites only that section.

use std::path::Path;

use anyhow::{Context, Result};

/// Replaces the section between `<!-- {key}:begin -->` and `<!-- {key}:end -->` in `path` by `section`,
/// or appends it when the markers are absent. A missing file starts as `header`.
pub(crate) fn write_marked_section(
    path: &Path,
    key: &str,
    section: &str,
    header: &str,
) -> Result<()> {
    let begin = format!("<!-- {key}:begin -->");
    let end = format!("<!-- {key}:end -->");
    let existing = std::fs::read_to_string(path).unwrap_or_else(|_| header.to_string());
    let block = format!("{begin}\n{section}{end}");
    let updated = match (existing.find(&begin), existing.find(&end)) {
        (Some(from), Some(to)) if to > from => {
            format!(
                "{}{block}{}",
                &existing[..from],
                &existing[to + end.len()..]
            )
        }
        _ => format!("{}\n\n{block}\n", existing.trim_end()),
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    // Atomic (temporary file, fsync, rename): a reader or a crash never sees a cut report.
    tint_eval::write_atomic(path, updated.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_replaced_in_place_and_appended_when_new() {
        let path = std::env::temp_dir().join(format!("tint-report-doc-{}.md", std::process::id()));
        std::fs::remove_file(&path).ok();
        write_marked_section(&path, "a", "one\n", "# Title\n").unwrap();
        write_marked_section(&path, "b", "two\n", "# Title\n").unwrap();
        write_marked_section(&path, "a", "ONE\n", "# Title\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# Title\n\n<!-- a:begin -->\nONE\n<!-- a:end -->\n\n<!-- b:begin -->\ntwo\n<!-- b:end -->\n"
        );
        std::fs::remove_file(&path).ok();
    }
}
