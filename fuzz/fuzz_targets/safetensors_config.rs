//! `config.json` + `model.safetensors`: the input is split at its first NUL byte into the config text
//! and the weights file, and loaded as a model directory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (config, weights) = (&data[..split], data.get(split + 1..).unwrap_or(&[]));
    let dir = std::env::temp_dir().join(format!("tint-fuzz-model-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err()
        || std::fs::write(dir.join("config.json"), config).is_err()
        || std::fs::write(dir.join("model.safetensors"), weights).is_err()
    {
        return;
    }
    let _ = tint_aux::load_model::<burn::backend::Flex>(&dir, &Default::default());
});
