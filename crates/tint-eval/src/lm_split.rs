//! Disjoint tuning and evaluation blocks for language modelling.
//!
//! A corpus is a list of documents (for the State of the Union: one address per document, in
//! chronological order). Every `tune_every`-th document (indices `tune_every − 1`, `2 tune_every − 1`,
//! …) belongs to the tuning split, the others to the evaluation split. Each split's documents are
//! concatenated and cut into full blocks, of which at most `max_blocks` evenly spaced ones are kept;
//! every block records the documents it covers. A step size is chosen on tuning blocks only, and
//! [`LmSplit::check_disjoint`] refuses a split whose evaluation blocks share a document with its
//! tuning blocks. A corpus of one document (a `--text` file) is first cut into `tune_every` equal
//! parts, which then play the role of documents.

use serde::{Deserialize, Serialize};

use crate::EvalError;

/// A named token sequence (one address of the corpus).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Name in reports (a file name, or `name [part i/k]`).
    pub name: String,
    /// Its tokens.
    pub tokens: Vec<u32>,
}

/// A block of `block_size` tokens and the documents it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Token ids.
    pub tokens: Vec<u32>,
    /// Names of the documents the block's tokens come from, in order.
    pub documents: Vec<String>,
}

/// How a corpus is split and cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitSpec {
    /// Tokens per block.
    pub block_size: usize,
    /// Evaluation blocks kept (evenly spaced over the evaluation documents).
    pub eval_blocks: usize,
    /// Tuning blocks kept (evenly spaced over the tuning documents); 0 when nothing is tuned.
    pub tune_blocks: usize,
    /// Every `tune_every`-th document is a tuning document (at least 2).
    pub tune_every: usize,
}

/// Evaluation and tuning blocks of a corpus, with the documents each side uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LmSplit {
    /// The settings that produced it.
    pub spec: SplitSpec,
    /// The rule, in words, for reports.
    pub rule: String,
    /// Blocks that are evaluated.
    pub eval: Vec<Block>,
    /// Blocks that step sizes are chosen on.
    pub tune: Vec<Block>,
    /// Documents of the evaluation split (all of them, used or not).
    pub eval_documents: usize,
    /// Documents of the tuning split.
    pub tune_documents: usize,
}

impl LmSplit {
    /// Splits `documents` and cuts both sides into blocks.
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] for a block size below 4, `tune_every < 2`, no evaluation
    /// block or no document; [`EvalError::TextTooShort`] when a side has fewer tokens than one block
    /// (the tuning side only when `tune_blocks > 0`).
    pub fn new(documents: &[Document], spec: SplitSpec) -> Result<Self, EvalError> {
        if spec.block_size < 4 {
            return Err(EvalError::InvalidSetting {
                name: "--block-size",
                value: spec.block_size.to_string(),
                rule: "must be at least 4".into(),
            });
        }
        if spec.tune_every < 2 {
            return Err(EvalError::InvalidSetting {
                name: "--tune-every",
                value: spec.tune_every.to_string(),
                rule: "every k-th document is for tuning: k must be at least 2".into(),
            });
        }
        if spec.eval_blocks == 0 {
            return Err(EvalError::InvalidSetting {
                name: "--max-blocks",
                value: "0".into(),
                rule: "must be at least 1".into(),
            });
        }
        if documents.is_empty() {
            return Err(EvalError::InvalidSetting {
                name: "text",
                value: "no document".into(),
                rule: "the corpus needs at least one document".into(),
            });
        }
        let parts;
        let documents = if documents.len() == 1 {
            parts = split_into_parts(&documents[0], spec.tune_every);
            &parts[..]
        } else {
            documents
        };
        let is_tune = |i: usize| {
            if documents.len() < spec.tune_every {
                i == documents.len() - 1
            } else {
                i % spec.tune_every == spec.tune_every - 1
            }
        };
        let pick = |tuning: bool| -> Vec<&Document> {
            documents
                .iter()
                .enumerate()
                .filter(|(i, _)| is_tune(*i) == tuning)
                .map(|(_, d)| d)
                .collect()
        };
        let (tune_docs, eval_docs) = (pick(true), pick(false));
        let eval = cut(&eval_docs, spec.block_size, spec.eval_blocks)?;
        let tune = if spec.tune_blocks > 0 {
            cut(&tune_docs, spec.block_size, spec.tune_blocks)?
        } else {
            Vec::new()
        };
        let rule = if documents.len() < spec.tune_every {
            format!(
                "tuning blocks from the last of {} documents, evaluation blocks from the others",
                documents.len()
            )
        } else {
            format!(
                "tuning blocks from every {}-th document (indices {}, {}, …), evaluation blocks \
                 from the others",
                spec.tune_every,
                spec.tune_every - 1,
                2 * spec.tune_every - 1
            )
        };
        let split = Self {
            spec,
            rule,
            eval,
            tune,
            eval_documents: eval_docs.len(),
            tune_documents: tune_docs.len(),
        };
        split.check_disjoint()?;
        Ok(split)
    }

    /// Refuses a split in which an evaluation block shares a document, or its exact tokens, with a
    /// tuning block.
    ///
    /// # Errors
    ///
    /// [`EvalError::TuningOverlap`] naming the shared documents.
    pub fn check_disjoint(&self) -> Result<(), EvalError> {
        let mut shared: Vec<String> = Vec::new();
        for e in &self.eval {
            for t in &self.tune {
                for d in &e.documents {
                    if t.documents.contains(d) && !shared.contains(d) {
                        shared.push(d.clone());
                    }
                }
                if e.tokens == t.tokens && shared.is_empty() {
                    shared.push("(identical block tokens)".into());
                }
            }
        }
        if shared.is_empty() {
            Ok(())
        } else {
            Err(EvalError::TuningOverlap { shared })
        }
    }

    /// Token ids of the evaluation blocks.
    pub fn eval_tokens(&self) -> Vec<Vec<u32>> {
        self.eval.iter().map(|b| b.tokens.clone()).collect()
    }

    /// Token ids of the tuning blocks.
    pub fn tune_tokens(&self) -> Vec<Vec<u32>> {
        self.tune.iter().map(|b| b.tokens.clone()).collect()
    }

    /// Distinct documents of the evaluation blocks and of the tuning blocks, in order, for reports.
    pub fn used_documents(&self) -> (Vec<String>, Vec<String>) {
        let distinct = |blocks: &[Block]| {
            let mut names: Vec<String> = Vec::new();
            for d in blocks.iter().flat_map(|b| &b.documents) {
                if !names.contains(d) {
                    names.push(d.clone());
                }
            }
            names
        };
        (distinct(&self.eval), distinct(&self.tune))
    }
}

/// `doc` cut into `k` consecutive parts of (nearly) equal length, named `name [part i/k]`.
fn split_into_parts(doc: &Document, k: usize) -> Vec<Document> {
    let n = doc.tokens.len();
    (0..k)
        .map(|i| Document {
            name: format!("{} [part {}/{k}]", doc.name, i + 1),
            tokens: doc.tokens[i * n / k..(i + 1) * n / k].to_vec(),
        })
        .collect()
}

/// Concatenates `docs`, cuts full blocks of `block_size` (a trailing partial block is dropped) and
/// keeps at most `max_blocks` evenly spaced ones (indices `i · n_full / n`), with the documents each
/// covers.
fn cut(docs: &[&Document], block_size: usize, max_blocks: usize) -> Result<Vec<Block>, EvalError> {
    let total: usize = docs.iter().map(|d| d.tokens.len()).sum();
    let n_full = total / block_size;
    if n_full == 0 {
        return Err(EvalError::TextTooShort {
            tokens: total,
            block_size,
        });
    }
    // Start offset of each document in the concatenation.
    let mut starts = Vec::with_capacity(docs.len());
    let mut offset = 0;
    for d in docs {
        starts.push(offset);
        offset += d.tokens.len();
    }
    let n = n_full.min(max_blocks);
    let mut blocks = Vec::with_capacity(n);
    for i in 0..n {
        let b = i * n_full / n;
        let (lo, hi) = (b * block_size, (b + 1) * block_size);
        let mut tokens = Vec::with_capacity(block_size);
        let mut documents = Vec::new();
        for (d, &start) in docs.iter().zip(&starts) {
            let end = start + d.tokens.len();
            if end <= lo || start >= hi || d.tokens.is_empty() {
                continue;
            }
            tokens.extend_from_slice(&d.tokens[lo.max(start) - start..hi.min(end) - start]);
            documents.push(d.name.clone());
        }
        blocks.push(Block { tokens, documents });
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten documents whose tokens encode (document, position): doc d holds 100·d + j.
    fn corpus(lengths: &[usize]) -> Vec<Document> {
        lengths
            .iter()
            .enumerate()
            .map(|(d, &len)| Document {
                name: format!("doc{d}"),
                tokens: (0..len as u32).map(|j| 100 * d as u32 + j).collect(),
            })
            .collect()
    }

    fn spec(eval_blocks: usize, tune_blocks: usize) -> SplitSpec {
        SplitSpec {
            block_size: 8,
            eval_blocks,
            tune_blocks,
            tune_every: 4,
        }
    }

    #[test]
    fn tuning_blocks_never_share_a_document_with_evaluation_blocks() {
        let docs = corpus(&[20, 13, 30, 9, 25, 17, 40, 11, 22, 31]);
        for (e, t) in [(1, 1), (3, 2), (100, 100)] {
            let split = LmSplit::new(&docs, spec(e, t)).unwrap();
            assert!(!split.eval.is_empty() && !split.tune.is_empty());
            for block in &split.eval {
                assert_eq!(block.tokens.len(), 8);
                for &tok in &block.tokens {
                    let doc = tok / 100;
                    assert!(doc % 4 != 3, "evaluation token {tok} from tuning doc {doc}");
                }
            }
            for block in &split.tune {
                for &tok in &block.tokens {
                    assert_eq!(
                        tok / 100 % 4,
                        3,
                        "tuning token {tok} from doc {}",
                        tok / 100
                    );
                }
            }
            // The recorded documents match the tokens.
            for block in split.eval.iter().chain(&split.tune) {
                for &tok in &block.tokens {
                    assert!(block.documents.contains(&format!("doc{}", tok / 100)));
                }
            }
        }
        // 3, 7 are the tuning documents: 9 + 11 = 20 tokens = 2 full blocks.
        let all = LmSplit::new(&docs, spec(100, 100)).unwrap();
        assert_eq!(all.tune.len(), 2);
        assert_eq!((all.eval_documents, all.tune_documents), (8, 2));
        // A block spanning doc3 and doc7 covers both.
        assert_eq!(all.tune[1].documents, vec!["doc3", "doc7"]);
    }

    #[test]
    fn an_overlap_is_refused() {
        let docs = corpus(&[20, 13, 30, 9, 25]);
        let mut split = LmSplit::new(&docs, spec(4, 1)).unwrap();
        assert!(split.check_disjoint().is_ok());
        split.tune.push(split.eval[0].clone());
        let err = split.check_disjoint().unwrap_err();
        assert!(
            matches!(&err, EvalError::TuningOverlap { shared } if shared.contains(&"doc0".to_string())),
            "{err}"
        );
        assert!(err.to_string().contains("doc0"), "{err}");
    }

    #[test]
    fn one_document_is_cut_into_parts_and_few_documents_tune_on_the_last() {
        let one = corpus(&[64]);
        let split = LmSplit::new(&one, spec(10, 10)).unwrap();
        // Parts of 16 tokens; part 4/4 (tokens 48..64) is the tuning part.
        assert_eq!(split.tune.len(), 2);
        assert!(split.tune.iter().flat_map(|b| &b.tokens).all(|&t| t >= 48));
        assert!(split.eval.iter().flat_map(|b| &b.tokens).all(|&t| t < 48));
        assert_eq!(split.tune[0].documents, vec!["doc0 [part 4/4]"]);
        let three = corpus(&[16, 16, 16]);
        let split = LmSplit::new(&three, spec(10, 10)).unwrap();
        assert!(split
            .tune
            .iter()
            .flat_map(|b| &b.tokens)
            .all(|&t| t / 100 == 2));
        assert!(split.rule.contains("last of 3"), "{}", split.rule);
    }

    #[test]
    fn no_tuning_blocks_when_none_are_asked_and_bad_settings_are_named() {
        let docs = corpus(&[20, 13, 30, 9]);
        let split = LmSplit::new(&docs, spec(2, 0)).unwrap();
        assert!(split.tune.is_empty());
        let mut bad = spec(2, 0);
        bad.tune_every = 1;
        let err = LmSplit::new(&docs, bad).unwrap_err().to_string();
        assert!(err.contains("tune-every"), "{err}");
        let err = LmSplit::new(&corpus(&[3, 3, 3, 3]), spec(2, 1)).unwrap_err();
        assert!(matches!(err, EvalError::TextTooShort { .. }), "{err}");
    }
}
