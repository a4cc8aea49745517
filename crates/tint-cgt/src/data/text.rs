//! Text mixtures (paper §4.1): two excerpts from random documents of a corpus, the first cut at a
//! uniform position in `[cut_min, cut_max]`, concatenated and truncated to `seq_length + 1` tokens.
//! Tokens are bytes (vocabulary 256), so any text can serve as corpus. [`TextCorpus`] splits the
//! documents into training and held-out ones; [`TextMixture::continuation`] draws the one-document
//! samples of the specialisation reading (paper Fig. 6: `y` frozen after a prefix).

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

/// The documents of a corpus split into training and held-out ones: every
/// [`TextCorpus::HELD_OUT_EVERY`]-th document in the given order (the 8th, 16th, …) is held out, so
/// that evaluation reads documents training never saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextCorpus {
    /// Documents the training stream draws from.
    pub train: Vec<Vec<u8>>,
    /// Documents only the evaluation draws from.
    pub held_out: Vec<Vec<u8>>,
}

impl TextCorpus {
    /// One document in this many is held out.
    pub const HELD_OUT_EVERY: usize = 8;

    /// Documents shorter than this (after trimming) are dropped.
    pub const MIN_DOCUMENT_BYTES: usize = 16;

    /// Splits `documents` (in a fixed order: the caller's, e.g. sorted file names) after dropping
    /// those shorter than [`TextCorpus::MIN_DOCUMENT_BYTES`].
    ///
    /// # Errors
    /// Fewer than two training or two held-out documents remain (a mixture needs two different ones).
    pub fn split(documents: Vec<Vec<u8>>) -> Result<Self> {
        let (mut train, mut held_out) = (Vec::new(), Vec::new());
        let kept = documents
            .into_iter()
            .filter(|d| d.len() >= Self::MIN_DOCUMENT_BYTES);
        for (i, document) in kept.enumerate() {
            if i % Self::HELD_OUT_EVERY == Self::HELD_OUT_EVERY - 1 {
                held_out.push(document);
            } else {
                train.push(document);
            }
        }
        if train.len() < 2 || held_out.len() < 2 {
            return Err(CgtError::InvalidDataConfig(format!(
                "the corpus gives {} training and {} held-out documents of at least {} bytes (one \
                 in {} is held out); each side needs two, so give at least {} documents",
                train.len(),
                held_out.len(),
                Self::MIN_DOCUMENT_BYTES,
                Self::HELD_OUT_EVERY,
                2 * Self::HELD_OUT_EVERY
            )));
        }
        Ok(Self { train, held_out })
    }

    /// The documents of a text in which blank lines separate documents, trimmed.
    pub fn documents_of(text: &str) -> Vec<Vec<u8>> {
        text.split("\n\n")
            .map(|d| d.trim().as_bytes().to_vec())
            .collect()
    }
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
        let documents: Vec<Vec<u8>> = TextCorpus::documents_of(corpus)
            .into_iter()
            .filter(|d| d.len() >= TextCorpus::MIN_DOCUMENT_BYTES)
            .collect();
        Self::from_documents(documents, seq_length, cut_min, cut_max, batch_size, seed)
    }

    /// Builds the stream over `documents` (each at least one byte).
    pub fn from_documents(
        documents: Vec<Vec<u8>>,
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
        if documents.len() < 2 || documents.iter().any(|d| d.is_empty()) {
            return Err(CgtError::InvalidDataConfig(format!(
                "the corpus needs at least two non-empty documents (blank-line separated, >= {} \
                 bytes); it has {}",
                TextCorpus::MIN_DOCUMENT_BYTES,
                documents.iter().filter(|d| !d.is_empty()).count()
            )));
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

    /// One excerpt of `prefix + seq_length + 1` contiguous bytes of one random document (wrapping
    /// around a shorter one with a space): the specialisation reading's sample, whose first `prefix`
    /// bytes set the frozen `y` and whose remaining `seq_length + 1` bytes are the continuation.
    pub fn continuation(&self, prefix: usize, rng: &mut impl Rng) -> Vec<u8> {
        let document = rng.random_range(0..self.documents.len());
        self.excerpt(document, prefix + self.seq_length + 1, rng)
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
    fn every_eighth_document_is_held_out_and_too_few_are_refused() {
        let documents: Vec<Vec<u8>> = (0..20u8).map(|i| vec![b'a' + i; 20]).collect();
        let corpus = TextCorpus::split(documents.clone()).unwrap();
        assert_eq!(
            corpus.held_out,
            vec![documents[7].clone(), documents[15].clone()]
        );
        assert_eq!(corpus.train.len(), 18);
        assert!(corpus.train.iter().all(|d| !corpus.held_out.contains(d)));
        // Short documents are dropped before counting, so a tiny corpus names its counts.
        let mut short = documents[..15].to_vec();
        short.push(b"too short".to_vec());
        let message = TextCorpus::split(short).unwrap_err().to_string();
        assert!(message.contains("14 training and 1 held-out"), "{message}");
    }

    #[test]
    fn a_continuation_is_one_contiguous_excerpt() {
        let text: Vec<u8> = (0..200u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mixture =
            TextMixture::from_documents(vec![text.clone(), text.clone()], 24, 8, 12, 1, 3).unwrap();
        let mut rng = step_rng(5, 0);
        let sample = mixture.continuation(10, &mut rng);
        assert_eq!(sample.len(), 10 + 24 + 1);
        let start = text.iter().position(|&b| b == sample[0]).unwrap();
        // Consecutive letters of the alphabet: the excerpt is contiguous.
        for pair in sample.windows(2) {
            assert_eq!((pair[0] - b'a' + 1) % 26, pair[1] - b'a');
        }
        assert!(start < 26);
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(TextMixture::new(CORPUS, 24, 12, 8, 4, 0).is_err());
        assert!(TextMixture::new("only one document here, long enough", 24, 8, 12, 4, 0).is_err());
    }
}
