//! The corpus of a language-modelling run as named documents, and the content hashes that the
//! resume fingerprint records (`crate::resume`).

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::EvalError;

pub use tint_assets::MAX_TEXT_FILE_BYTES;

/// A document of the corpus: its name (the file name) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDocument {
    /// The file name.
    pub name: String,
    /// The text.
    pub content: String,
}

/// The documents at `path`: a file is one document (as is); a directory holds one document per
/// `.txt` file, in name order (the State of the Union asset: chronological), each trimmed.
///
/// # Errors
///
/// [`EvalError::Io`] naming a directory that cannot be listed, [`EvalError::Aux`] naming a file
/// that cannot be read, is not UTF-8 or has more than [`MAX_TEXT_FILE_BYTES`] bytes (whatever kind
/// of file), and [`EvalError::InvalidSetting`] for a directory without a `.txt` file.
pub fn load_documents(path: &Path) -> Result<Vec<TextDocument>, EvalError> {
    let io = |operation: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| EvalError::Io {
            operation,
            path,
            source,
        }
    };
    if !path.is_dir() {
        let content = tint_aux::read_text_limited(path, "text", MAX_TEXT_FILE_BYTES)?;
        return Ok(vec![TextDocument {
            name: file_label(path),
            content,
        }]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io("list", path))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(io("list", path))?;
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    if files.is_empty() {
        return Err(EvalError::InvalidSetting {
            name: "--text",
            value: path.display().to_string(),
            rule: "a directory of documents holds at least one .txt file".into(),
        });
    }
    files
        .iter()
        .map(|f| {
            let content = tint_aux::read_text_limited(f, "text", MAX_TEXT_FILE_BYTES)?;
            Ok(TextDocument {
                name: file_label(f),
                content: content.trim().to_string(),
            })
        })
        .collect()
}

/// The documents at `path` ([`load_documents`]) as token ids, for the split of a
/// language-modelling run ([`crate::lm_split`]).
///
/// # Errors
///
/// The errors of [`load_documents`], and the tokenizer's.
pub fn tokenized_documents(
    path: &Path,
    tokenizer: &tint_aux::tokenizer::AuxTokenizer,
) -> Result<(Vec<TextDocument>, Vec<crate::lm_split::Document>), EvalError> {
    let texts = load_documents(path)?;
    let documents = texts
        .iter()
        .map(|doc| {
            Ok(crate::lm_split::Document {
                name: doc.name.clone(),
                tokens: tokenizer.encode(&doc.content)?,
            })
        })
        .collect::<Result<_, EvalError>>()?;
    Ok((texts, documents))
}

/// The file name of `path` (the whole path when it has none), for document names and chart titles.
pub fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// SHA-256 (hex) of the documents: each name and content, each preceded by its length.
pub fn sha256_documents(docs: &[TextDocument]) -> String {
    let mut hasher = Sha256::new();
    for doc in docs {
        for part in [doc.name.as_bytes(), doc.content.as_bytes()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
    }
    format!("{:x}", hasher.finalize())
}

/// SHA-256 (hex) of `files`' contents in order, each preceded by its length.
///
/// # Errors
///
/// [`EvalError::Io`] naming the file that cannot be read.
pub fn sha256_files(files: &[PathBuf]) -> Result<String, EvalError> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    for f in files {
        let io = |source| EvalError::Io {
            operation: "read",
            path: f.clone(),
            source,
        };
        let mut file = std::fs::File::open(f).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        hasher.update(len.to_le_bytes());
        loop {
            let n = file.read(&mut buffer).map_err(io)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
    }
    Ok(format!("{:x}", hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_its_txt_files_in_name_order_and_hashes_follow_the_content() {
        let dir = std::env::temp_dir().join(format!("tint-documents-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.txt"), "  second \n").unwrap();
        std::fs::write(dir.join("a.txt"), "first").unwrap();
        std::fs::write(dir.join("notes.md"), "not a document").unwrap();
        let docs = load_documents(&dir).unwrap();
        let names: Vec<&str> = docs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a.txt", "b.txt"]);
        assert_eq!(docs[1].content, "second", "directory documents are trimmed");
        let single = load_documents(&dir.join("b.txt")).unwrap();
        assert_eq!(
            single[0].content, "  second \n",
            "a single file is taken as is"
        );
        let hash = sha256_documents(&docs);
        let mut changed = docs.clone();
        changed[0].content.push('!');
        assert_ne!(hash, sha256_documents(&changed));
        // The length prefix separates name from content: moving a byte across changes the hash.
        let moved = vec![TextDocument {
            name: "a.txtf".into(),
            content: "irst".into(),
        }];
        assert_ne!(sha256_documents(&docs[..1]), sha256_documents(&moved));
        // SHA-256 of the 8-byte little-endian length 5 followed by "first" (computed with sha256sum).
        let file_hash = sha256_files(&[dir.join("a.txt")]).unwrap();
        assert_eq!(
            file_hash,
            "8800297ab8c02b0db0308a6c714fda13388269c110c2884fd91868e066986986"
        );
        assert_ne!(file_hash, sha256_files(&[dir.join("b.txt")]).unwrap());
        std::fs::remove_file(dir.join("notes.md")).unwrap();
        std::fs::remove_file(dir.join("a.txt")).unwrap();
        std::fs::remove_file(dir.join("b.txt")).unwrap();
        assert!(matches!(
            load_documents(&dir),
            Err(EvalError::InvalidSetting { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_text_is_a_read_error_naming_it() {
        // The message once said "cannot write" for a corpus that could not be read.
        let missing = std::env::temp_dir().join(format!("tint-no-text-{}.txt", std::process::id()));
        let message = load_documents(&missing).unwrap_err().to_string();
        assert!(
            message.contains(&format!("missing file {}", missing.display()))
                && !message.contains("write"),
            "{message}"
        );
        let err = sha256_files(std::slice::from_ref(&missing)).unwrap_err();
        assert!(
            matches!(
                err,
                EvalError::Io {
                    operation: "read",
                    ..
                }
            ),
            "{err}"
        );
    }
}
