//! The digest of one ICL cell's inputs (issue 66 item 4): what a cell's numbers are computed
//! from — the task's demonstration pool and evaluation examples, the prompt template, the cell's
//! settings (shots, seeds, format, loss, method settings with its step size, calibration prior)
//! and the input length limit. Stored in the cell ([`super::CellResult::inputs_sha256`]);
//! `--resume` reuses a stored cell only when this run computes the same digest for it.

use sha2::{Digest, Sha256};

use super::cell_settings::IclSettings;
use super::prompt::PromptEncoder;
use super::task::TaskData;

/// The SHA-256 (hex) of a cell's inputs: `data` (task, pool and evaluation examples in order),
/// the `encoder`'s template and input limit, and every field of `settings`.
pub fn cell_inputs_sha256(
    data: &TaskData,
    encoder: &PromptEncoder<'_>,
    settings: &IclSettings,
) -> String {
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    part(data.task.to_string().as_bytes());
    for examples in [&data.train, &data.test] {
        part(&(examples.len() as u64).to_le_bytes());
        for example in examples {
            part(example.text.as_bytes());
            part(&(example.label as u64).to_le_bytes());
        }
    }
    part(format!("{:?}", encoder.template()).as_bytes());
    part(&(encoder.max_input_tokens() as u64).to_le_bytes());
    part(format!("{settings:?}").as_bytes());
    format!("{:x}", hash.finalize())
}

/// The SHA-256 (hex) of what a step's tuning is computed from: the `dev` task data (the pool its
/// demonstrations are drawn from and the dev examples), the `encoder`'s template and input limit,
/// the tuning's `settings` (shots, seeds, format, loss, balance, calibration prior) and `method`:
/// the method, the tuned parameter, its grid, the extensions allowed and the flags that shape the
/// method ([`cell_inputs_sha256`] with `method` as the settings' method settings). Recorded in
/// the tuning record ([`crate::tune_record::TuneRecord::inputs_sha256`]) so that `--cells-from`
/// reuses another report's tuning only for the same computation.
pub fn tuning_inputs_sha256(
    dev: &TaskData,
    encoder: &PromptEncoder<'_>,
    settings: &IclSettings,
    method: &str,
) -> String {
    let settings = IclSettings {
        method_settings: format!("tuning: {method}"),
        ..settings.clone()
    };
    cell_inputs_sha256(dev, encoder, &settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icl::task::{Example, TaskKind};
    use crate::icl::template::Template;

    /// Every input changes the digest: a pool example, a test label, the settings' method
    /// settings, seeds and prior; the same inputs give the same digest.
    #[test]
    fn every_input_changes_the_digest() {
        let example = |text: &str, label| Example {
            text: text.into(),
            label,
        };
        let data = TaskData {
            task: TaskKind::Sst2,
            train: vec![example("good", 1), example("bad", 0)],
            test: vec![example("fine", 1)],
        };
        let template = Template::for_task(TaskKind::Sst2);
        let micro = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/official-tint/micro-gpt2-random");
        let tokenizer = tint_aux::AuxTokenizer::from_dir(&micro).unwrap();
        let encoder = PromptEncoder::new(&tokenizer, &template, 64, 1024).unwrap();
        let settings = IclSettings {
            method_settings: "lr 1e-3".into(),
            ..Default::default()
        };
        let base = cell_inputs_sha256(&data, &encoder, &settings);
        assert_eq!(base, cell_inputs_sha256(&data, &encoder, &settings));
        let mut pool = data.clone();
        pool.train[1].text = "awful".into();
        let mut label = data.clone();
        label.test[0].label = 0;
        let mut method = settings.clone();
        method.method_settings = "lr 3e-3".into();
        let mut seeds = settings.clone();
        seeds.seeds = vec![7];
        let mut prior = settings.clone();
        prior.prior = Some(vec![-0.5, -1.0]);
        for other in [
            cell_inputs_sha256(&pool, &encoder, &settings),
            cell_inputs_sha256(&label, &encoder, &settings),
            cell_inputs_sha256(&data, &encoder, &method),
            cell_inputs_sha256(&data, &encoder, &seeds),
            cell_inputs_sha256(&data, &encoder, &prior),
        ] {
            assert_ne!(other, base);
        }
        // A tuning's digest: its method and grid count, and it is never a cell's.
        let tuning = tuning_inputs_sha256(&data, &encoder, &settings, "DynEval lr grid [1e-3]");
        assert_eq!(
            tuning,
            tuning_inputs_sha256(&data, &encoder, &settings, "DynEval lr grid [1e-3]")
        );
        for other in [
            tuning_inputs_sha256(&data, &encoder, &settings, "DynEval lr grid [1e-3, 1e-2]"),
            tuning_inputs_sha256(&pool, &encoder, &settings, "DynEval lr grid [1e-3]"),
            tuning_inputs_sha256(&data, &encoder, &seeds, "DynEval lr grid [1e-3]"),
            base.clone(),
        ] {
            assert_ne!(other, tuning);
        }
    }
}
