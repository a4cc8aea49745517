//! The text presets' corpus: documents read from files and directories, split into training and
//! held-out documents ([`TextCorpus::split`]), and the streams made of them ([`text_stream`]): the
//! training mixtures of a seed and the held-out mixtures (and continuations) every run is
//! evaluated on.

use std::path::{Path, PathBuf};

use tint_cgt::data::{TextCorpus, TextMixture};
use tint_cgt::presets::DataPreset;

use tint_lab::Assets;

use super::error::CgtRunError;

/// The asset of the default corpus's State of the Union addresses (a folder of one file per address).
pub const SOTU_ASSET: &str = "sotu";
/// The asset of the default corpus's Shakespeare works (a folder of one file per work).
pub const SHAKESPEARE_ASSET: &str = "shakespeare";

/// The default corpus of the text presets, from `assets`: the SOTU addresses joined oldest first
/// (`tint_assets::corpus::concat_texts`, the text `cargo xtask fetch` keeps as `sotu-all.txt`) and
/// read as one file, then Shakespeare's works, a document per file: the documents
/// [`read_documents`] gives for that file and the works' folder.
///
/// # Errors
/// [`CgtRunError::Corpus`] when an asset cannot be obtained or the addresses cannot be read;
/// as [`read_documents`] for the works.
pub fn default_documents(assets: &dyn Assets) -> Result<Vec<Vec<u8>>, CgtRunError> {
    let sotu = assets.asset(SOTU_ASSET).map_err(CgtRunError::Corpus)?;
    let addresses = tint_assets::corpus::concat_texts(&sotu).map_err(CgtRunError::Corpus)?;
    let mut documents = TextCorpus::documents_of(&addresses);
    let works = assets
        .asset(SHAKESPEARE_ASSET)
        .map_err(CgtRunError::Corpus)?;
    documents.extend(read_documents(&[works])?);
    Ok(documents)
}

/// The documents of `paths` in order: a file holds documents separated by blank lines (the SOTU
/// file: one address per document), a directory one document per regular file, in file-name order
/// (Shakespeare: one work per document). Each file is read with the limit of every text file.
///
/// # Errors
/// A path that cannot be read (named), a file that is not UTF-8 or too large, or a directory
/// without files.
pub fn read_documents(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, CgtRunError> {
    let read = |path: &Path| {
        tint_assets::read_text_limited(path, "text corpus", tint_assets::MAX_TEXT_FILE_BYTES)
            .map_err(CgtRunError::Text)
    };
    let mut documents = Vec::new();
    for path in paths {
        if path.is_dir() {
            let io = |source| CgtRunError::Io {
                operation: "list",
                path: path.clone(),
                source,
            };
            let mut files = Vec::new();
            for entry in std::fs::read_dir(path).map_err(io)? {
                let entry = entry.map_err(io)?;
                if entry.file_type().map_err(io)?.is_file() {
                    files.push(entry.path());
                }
            }
            if files.is_empty() {
                return Err(CgtRunError::InvalidSetting {
                    name: "--text",
                    value: path.display().to_string(),
                    rule: "a directory given as corpus holds one document per file; this one has \
                           no file",
                });
            }
            files.sort();
            for file in files {
                documents.push(read(&file)?.trim().as_bytes().to_vec());
            }
        } else {
            documents.extend(TextCorpus::documents_of(&read(path)?));
        }
    }
    Ok(documents)
}

/// The mixtures of `documents` with the lengths of `data` (a text preset's), stream `seed`: a
/// seed's training stream ([`crate::conventions::text_train_seed`] over the training documents)
/// or the held-out stream every run is evaluated on ([`crate::conventions::text_eval_seed`] over
/// the held-out documents).
///
/// # Errors
/// `data` is not a text preset's, or its lengths do not fit ([`TextMixture::from_documents`]).
pub fn text_stream(
    documents: &[Vec<u8>],
    data: &DataPreset,
    seed: u64,
) -> Result<TextMixture, CgtRunError> {
    let building = || CgtRunError::cgt("building the text streams");
    let DataPreset::TextMixture {
        seq_length,
        cut_min,
        cut_max,
        batch_size,
    } = *data
    else {
        return Err(building()(tint_cgt::CgtError::InvalidDataConfig(
            "not a text preset".into(),
        )));
    };
    TextMixture::from_documents(
        documents.to_vec(),
        seq_length,
        cut_min,
        cut_max,
        batch_size,
        seed,
    )
    .map_err(building())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documents as text.
    fn as_text(documents: &[Vec<u8>]) -> Vec<&str> {
        documents
            .iter()
            .map(|d| std::str::from_utf8(d).unwrap())
            .collect()
    }

    use tint_assets::AssetError;

    /// Assets in a folder: `<root>/<name>`, or the reason `name` is refused.
    struct FolderAssets(PathBuf);

    impl Assets for FolderAssets {
        fn asset(&self, name: &str) -> Result<PathBuf, AssetError> {
            let path = self.0.join(name);
            match path.is_dir() {
                true => Ok(path),
                false => tint_lab::NoAssets("not in this test's folder").asset(name),
            }
        }
    }

    /// The default corpus read from the assets gives the documents the front end's joined file
    /// (`sotu-all.txt`) and the works' folder gave through [`read_documents`], in order; a missing
    /// asset is named in the error.
    #[test]
    fn default_documents_equal_the_joined_file_and_the_works() {
        let root = std::env::temp_dir().join(format!("tint-default-corpus-{}", std::process::id()));
        let (sotu, works) = (root.join(SOTU_ASSET), root.join(SHAKESPEARE_ASSET));
        std::fs::create_dir_all(&sotu).unwrap();
        std::fs::create_dir_all(&works).unwrap();
        std::fs::write(
            sotu.join("1791_b.txt"),
            "  second address\n\nits second part \n",
        )
        .unwrap();
        std::fs::write(sotu.join("1790_a.txt"), "first address\n").unwrap();
        std::fs::write(sotu.join("notes.md"), "not an address").unwrap();
        std::fs::write(works.join("hamlet.txt"), "to be").unwrap();
        let assets = FolderAssets(root.clone());
        let joined = root.join("sotu-all.txt");
        let text = tint_assets::corpus::concat_texts(&sotu).unwrap();
        std::fs::write(&joined, text).unwrap();
        let expected = read_documents(&[joined, works.clone()]).unwrap();
        let documents = default_documents(&assets).unwrap();
        assert_eq!(documents, expected);
        assert_eq!(
            as_text(&documents),
            [
                "first address",
                "second address",
                "its second part",
                "to be"
            ]
        );

        std::fs::remove_dir_all(&works).unwrap();
        let message = default_documents(&assets).unwrap_err().to_string();
        assert!(
            message.contains("default text corpus") && message.contains("asset shakespeare"),
            "{message}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn files_split_at_blank_lines_and_directories_give_a_document_per_file() {
        let root = std::env::temp_dir().join(format!("tint-corpus-{}", std::process::id()));
        let dir = root.join("works");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.txt"), "second work\n\nwith a blank line").unwrap();
        std::fs::write(dir.join("a.txt"), "first work").unwrap();
        std::fs::write(root.join("addresses.txt"), "one\n\n two \n\nthree").unwrap();
        let documents = read_documents(&[root.join("addresses.txt"), dir.clone()]).unwrap();
        assert_eq!(
            as_text(&documents),
            [
                "one",
                "two",
                "three",
                "first work",
                "second work\n\nwith a blank line"
            ]
        );

        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let message = read_documents(&[empty]).unwrap_err().to_string();
        assert!(
            message.contains("--text") && message.contains("no file"),
            "{message}"
        );
        let missing = read_documents(&[root.join("missing.txt")])
            .unwrap_err()
            .to_string();
        assert!(missing.contains("missing.txt"), "{missing}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
