//! `tokenizer.json` (the `tokenizers` crate's format), loaded and used to encode and decode a text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tint-fuzz-{}-tokenizer.json", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(tokenizer) = tint_aux::tokenizer::AuxTokenizer::from_tokenizer_json(&path) {
        if let Ok(ids) = tokenizer.encode("The quick brown fox, 1790.") {
            let _ = tokenizer.decode(&ids);
        }
    }
});
