//! Issue 66, findings 19–20: a weight is named as its file names it. Every parameter of each tiny
//! checkpoint (GPT-2, the three OPTs, LLaMA from safetensors and from GGUF) maps to a tensor the
//! file holds, and a NaN in a loaded weight is reported with that tensor's name and the file.

use std::collections::BTreeSet;
use std::path::Path;

use burn::module::Param;
use burn::tensor::{backend::Backend, Tensor, TensorData};
use safetensors::SafeTensors;
use tint_aux::gguf::GgufFile;
use tint_aux::{first_non_finite_weight, load_model, AuxModel, ParamInfo, ParamMapper};

use crate::common;
use crate::llama_tiny::{llama_fixture, tiny_gguf, write_temp};

type B = common::TestBackend;

/// Our parameter paths, in visiting order.
fn param_names(model: &AuxModel<B>) -> Vec<String> {
    struct Names(Vec<String>);
    impl<Bk: Backend> ParamMapper<Bk> for Names {
        fn map<const D: usize>(
            &mut self,
            info: &ParamInfo,
            param: Param<Tensor<Bk, D>>,
        ) -> Param<Tensor<Bk, D>> {
            self.0.push(info.name.clone());
            param
        }
    }
    let mut names = Names(Vec::new());
    let _ = model.clone().map_named_params(&mut names);
    names.0
}

/// `model` with the first value of parameter `target` set to NaN.
fn poison(model: AuxModel<B>, target: &str) -> AuxModel<B> {
    struct Poison<'a>(&'a str);
    impl<Bk: Backend> ParamMapper<Bk> for Poison<'_> {
        fn map<const D: usize>(
            &mut self,
            info: &ParamInfo,
            param: Param<Tensor<Bk, D>>,
        ) -> Param<Tensor<Bk, D>> {
            if info.name != self.0 {
                return param;
            }
            let value = param.val();
            let mut values = value.to_data().convert::<f32>().to_vec::<f32>().unwrap();
            values[0] = f32::NAN;
            let data = TensorData::new(values, value.shape());
            Param::from_tensor(Tensor::from_data(data, &value.device()))
        }
    }
    model.map_named_params(&mut Poison(target))
}

fn safetensors_names(path: &Path) -> BTreeSet<String> {
    let bytes = std::fs::read(path).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    tensors.names().into_iter().map(str::to_string).collect()
}

/// Every parameter of `model` names a tensor of `file_names`, from the file the model says.
fn check_every_parameter(model: &AuxModel<B>, file: &Path, file_names: &BTreeSet<String>) {
    assert_eq!(model.weight_file().path.as_deref(), Some(file));
    let names = param_names(model);
    assert!(!names.is_empty());
    for ours in names {
        let tensor = model
            .weight_file()
            .tensor_of(&ours)
            .unwrap_or_else(|| panic!("{}: no file name for {ours}", file.display()));
        assert!(
            file_names.contains(&tensor.name),
            "{}: {ours} maps to {}, which the file does not hold",
            file.display(),
            tensor.name
        );
    }
}

#[test]
fn every_parameter_maps_to_a_tensor_of_its_file() {
    for fixture in ["gpt2-tiny", "opt-post-ln", "opt-post-ln-proj", "opt-pre-ln"] {
        let dir = common::aux_fixture(fixture);
        let model = load_model::<B>(&dir, &Default::default()).unwrap();
        let file = dir.join("model.safetensors");
        check_every_parameter(&model, &file, &safetensors_names(&file));
    }
    for fixture in ["tiny", "tiny_tied"] {
        let dir = llama_fixture(fixture);
        let model = load_model::<B>(&dir, &Default::default()).unwrap();
        let file = dir.join("model.safetensors");
        check_every_parameter(&model, &file, &safetensors_names(&file));
        let gguf = write_temp(
            &format!("names-{fixture}.gguf"),
            &tiny_gguf(fixture, "gpt2"),
        );
        let model = load_model::<B>(&gguf, &Default::default()).unwrap();
        let file_names = GgufFile::open(&gguf)
            .unwrap()
            .tensors
            .iter()
            .map(|t| t.name.clone())
            .collect();
        check_every_parameter(&model, &gguf, &file_names);
        std::fs::remove_file(&gguf).unwrap();
    }
}

#[test]
fn a_non_finite_weight_is_named_by_its_files_tensor() {
    let dir = common::aux_fixture("gpt2-tiny");
    let model = load_model::<B>(&dir, &Default::default()).unwrap();
    assert_eq!(first_non_finite_weight(&model), None);
    let found = first_non_finite_weight(&poison(model.clone(), "ln_f.beta")).unwrap();
    let file = dir.join("model.safetensors");
    assert_eq!(
        found,
        format!(
            "weight `transformer.ln_f.bias` in {} (1 of 32 values non-finite)",
            file.display()
        )
    );
    let found = first_non_finite_weight(&poison(model, "blocks.0.attn.value.weight")).unwrap();
    assert!(
        found.starts_with(
            "weight `transformer.h.0.attn.c_attn.weight` (the value's third, the last) in "
        ),
        "{found}"
    );

    let gguf = write_temp("names-nan.gguf", &tiny_gguf("tiny", "gpt2"));
    let model = load_model::<B>(&gguf, &Default::default()).unwrap();
    let found = first_non_finite_weight(&poison(model, "blocks.0.mlp.gate.weight")).unwrap();
    std::fs::remove_file(&gguf).unwrap();
    assert!(
        found.starts_with(&format!(
            "weight `blk.0.ffn_gate.weight` in {} (1 of ",
            gguf.display()
        )),
        "{found}"
    );
}
