//! The token-ids JSON of `cargo xtask logits`: parsing and every check that runs before a tensor is built.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let path = std::path::Path::new("ids.json");
    if let Ok(ids) = tint_aux::TokenIds::parse(&text, path) {
        let _ = ids.check_vocab(50_257);
        let _ = ids.check_train_mask(path);
    }
});
