//! A reader for GGUF v2/v3 files (llama.cpp's model format): header, metadata of every value type,
//! tensor infos, alignment, dequantisation of F32/F16/BF16/Q8_0/Q4_0/Q4_1, and a byte-level BPE tokenizer
//! built from the `tokenizer.ggml.*` metadata.
//!
//! GGUF writes tensor dims innermost-first; [`TensorInfo::shape`] and [`DequantizedTensor`] give them
//! outermost-first (row-major), the order of PyTorch and burn.
//!
//! ```no_run
//! use tint_aux::gguf::{GgufFile, GgufTokenizer};
//! let file = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let n_layers = file.get_u64("llama.block_count")?;
//! let embedding = file.tensor_f32("token_embd.weight")?; // shape [vocab, d_model]
//! let tokenizer = GgufTokenizer::from_gguf(&file)?;
//! # Ok::<(), tint_aux::gguf::GgufError>(())
//! ```

mod dequant;
mod error;
mod file;
mod tensor_type;
mod tokenizer;
mod value;
mod writer;

pub use dequant::{
    dequantize, dequantize_q4_0_block, dequantize_q4_1_block, dequantize_q8_0_block, QK,
};
pub use error::GgufError;
pub use file::{
    DequantizedTensor, GgufFile, TensorInfo, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ARRAY_DEPTH,
    MAX_METADATA_VALUES,
};
pub use tensor_type::GgmlType;
pub use tokenizer::GgufTokenizer;
pub use value::{value_type, MetadataValue};
pub use writer::GgufWriter;
