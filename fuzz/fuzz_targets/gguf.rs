//! GGUF: the header/metadata/tensor-info parser, then a full LLaMA load (dequantisation, config
//! validation, tokenizer) of whatever parses.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if tint_aux::gguf::GgufFile::from_bytes(data.to_vec()).is_err() {
        return;
    }
    let path = std::env::temp_dir().join(format!("tint-fuzz-{}.gguf", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        let _ = tint_aux::llama::load_llama_gguf::<burn::backend::Flex>(&path, &Default::default());
    }
});
