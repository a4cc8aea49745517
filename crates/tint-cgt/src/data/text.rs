//! Text mixtures (paper §4.1): two excerpts from random documents of a corpus, the first cut at a
//! uniform position in `[cut_min, cut_max]`, concatenated and truncated to `seq_length + 1` tokens.
//! Tokens are bytes (vocabulary 256), so any text can serve as corpus.

use rand::Rng;

use super::batch::{BatchSource, HostBatch, HostInput, HostTargets};
use super::step_rng;
use crate::error::{CgtError, Result};

/// Byte-level vocabulary size.
pub const BYTE_VOCAB: usize = 256;

/// A text-mixture stream over an in-memory corpus.
#[derive(Clone, Debug)]
pub struct TextMixture {
    documents: Vec<Vec<u8>>,
    /// Model sequence length (inputs and targets are this long).
    pub seq_length: usize,
    /// Earliest cut of the first excerpt.
    pub cut_min: usize,
    /// Latest cut of the first excerpt.
    pub cut_max: usize,
    /// Sequences per batch.
    pub batch_size: usize,
    /// Stream seed.
    pub seed: u64,
}

impl TextMixture {
    /// Builds the stream; documents are the corpus split at blank lines, each at least 16 bytes.
    pub fn new(
        corpus: &str,
        seq_length: usize,
        cut_min: usize,
        cut_max: usize,
        batch_size: usize,
        seed: u64,
    ) -> Result<Self> {
        if seq_length < 2 || cut_min > cut_max || cut_max >= seq_length || batch_size == 0 {
            return Err(CgtError::InvalidDataConfig(format!(
                "need 0 <= cut_min <= cut_max < seq_length (got {cut_min}, {cut_max}, {seq_length}) and batch_size > 0"
            )));
        }
        let documents: Vec<Vec<u8>> = corpus
            .split("\n\n")
            .map(|d| d.trim().as_bytes().to_vec())
            .filter(|d| d.len() >= 16)
            .collect();
        if documents.len() < 2 {
            return Err(CgtError::InvalidDataConfig(
                "the corpus needs at least two documents (blank-line separated, >= 16 bytes)"
                    .into(),
            ));
        }
        Ok(Self {
            documents,
            seq_length,
            cut_min,
            cut_max,
            batch_size,
            seed,
        })
    }

    /// Number of documents.
    pub fn n_documents(&self) -> usize {
        self.documents.len()
    }

    /// An excerpt of `length` bytes from a document, starting at a random offset (wrapping around short
    /// documents with a space).
    fn excerpt(&self, document: usize, length: usize, rng: &mut impl Rng) -> Vec<u8> {
        let text = &self.documents[document];
        let start = if text.len() > length {
            rng.random_range(0..=text.len() - length)
        } else {
            0
        };
        text.iter()
            .chain(std::iter::once(&b' '))
            .cycle()
            .skip(start)
            .take(length)
            .copied()
            .collect()
    }

    /// One mixed sequence of `seq_length + 1` tokens and the position of the cut.
    pub fn sample(&self, rng: &mut impl Rng) -> (Vec<u8>, usize) {
        let first = rng.random_range(0..self.documents.len());
        let second = loop {
            let candidate = rng.random_range(0..self.documents.len());
            if candidate != first {
                break candidate;
            }
        };
        let cut = rng.random_range(self.cut_min..=self.cut_max);
        let mut tokens = self.excerpt(first, cut, rng);
        tokens.extend(self.excerpt(second, self.seq_length + 1 - cut, rng));
        (tokens, cut)
    }

    /// Batch `step` with the cut position of every sequence.
    pub fn annotated_batch(&self, step: u64) -> (HostBatch, Vec<usize>) {
        let mut rng = step_rng(self.seed, step);
        let mut inputs = Vec::with_capacity(self.batch_size * self.seq_length);
        let mut targets = Vec::with_capacity(self.batch_size * self.seq_length);
        let mut cuts = Vec::with_capacity(self.batch_size);
        for _ in 0..self.batch_size {
            let (tokens, cut) = self.sample(&mut rng);
            inputs.extend(tokens[..self.seq_length].iter().map(|&t| t as i64));
            targets.extend(tokens[1..].iter().map(|&t| t as i64));
            cuts.push(cut);
        }
        let batch = HostBatch {
            batch_size: self.batch_size,
            seq_length: self.seq_length,
            input: HostInput::Tokens(inputs),
            targets: HostTargets::Tokens(targets),
            loss_mask: vec![1.0; self.batch_size * self.seq_length],
        };
        (batch, cuts)
    }
}

impl BatchSource for TextMixture {
    fn batch(&self, step: u64) -> HostBatch {
        self.annotated_batch(step).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: &str =
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn mixture_switches_document_at_the_cut() {
        let mixture = TextMixture::new(CORPUS, 24, 8, 12, 4, 9).unwrap();
        let (batch, cuts) = mixture.annotated_batch(0);
        batch.validate().unwrap();
        let HostInput::Tokens(inputs) = &batch.input else {
            panic!("tokens expected")
        };
        for (b, &cut) in cuts.iter().enumerate() {
            assert!((8..=12).contains(&cut));
            let row = &inputs[b * 24..(b + 1) * 24];
            // Two different documents of repeated letters: the first `cut` bytes are one letter, the next another.
            assert!(row[..cut].iter().all(|&t| t == row[0]));
            assert!(row[cut..].iter().all(|&t| t == row[cut]));
            assert_ne!(row[0], row[cut]);
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(TextMixture::new(CORPUS, 24, 12, 8, 4, 0).is_err());
        assert!(TextMixture::new("only one document here, long enough", 24, 8, 12, 4, 0).is_err());
    }
}
