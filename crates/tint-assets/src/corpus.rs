//! Text corpora made of an asset's files (the State of the Union addresses: one `.txt` per speech).

use std::fs;
use std::path::{Path, PathBuf};

use crate::AssetError;

/// The `.txt` files of `dir` in file-name order (for SOTU: chronological), each trimmed, joined by
/// blank lines.
///
/// # Errors
///
/// [`AssetError::Io`] naming the directory or file.
pub fn concat_texts(dir: &Path) -> Result<String, AssetError> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(AssetError::io("read directory", dir))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(AssetError::io("read directory", dir))?;
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    let mut text = String::new();
    for file in &files {
        let speech = fs::read_to_string(file).map_err(AssetError::io("read", file))?;
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(speech.trim());
    }
    Ok(text)
}
