//! The parameters a TinT step moves, as a selection of the auxiliary model's parameters: what the
//! matched dynamic-evaluation baseline trains (`dyn-eval-matched`), what the examples and tests
//! compare the step with. One definition for every caller.

use burn::tensor::backend::Backend;
use tint_aux::{AuxModel, ParamGroup, ParamSelection};

/// The parameters a TinT step moves in the top `top_layers` blocks (`None`: every block), as a
/// dynamic-evaluation selection: on LLaMA models `W_V`, `W_O` and the SwiGLU maps
/// (docs/construction.md §14.4; norm gains, `W_Q`, `W_K` and the embeddings are frozen); on GPT-2
/// and OPT also the LayerNorms, whose bias TinT moves (§6.7) — the selection moves their gains as
/// well, the one difference from TinT's parameter set, stated in the reports.
pub fn tint_updated_params<B: Backend>(
    model: &AuxModel<B>,
    top_layers: Option<usize>,
) -> ParamSelection {
    let mut groups = vec![
        ParamGroup::AttnValue,
        ParamGroup::AttnOutput,
        ParamGroup::Mlp,
    ];
    if !matches!(model, AuxModel::Llama(_)) {
        groups.push(ParamGroup::LayerNorm);
    }
    ParamSelection {
        top_layers,
        groups: Some(groups),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> AuxModel<burn::backend::Flex> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(path);
        tint_aux::load_model(&dir, &Default::default()).unwrap()
    }

    /// LLaMA: values, outputs and MLPs of the chosen layers; GPT-2: the LayerNorms as well.
    #[test]
    fn a_step_moves_values_outputs_mlps_and_on_gpt2_the_norms() {
        let (values_outputs_mlps, with_norms) = (
            vec![
                ParamGroup::AttnValue,
                ParamGroup::AttnOutput,
                ParamGroup::Mlp,
            ],
            vec![
                ParamGroup::AttnValue,
                ParamGroup::AttnOutput,
                ParamGroup::Mlp,
                ParamGroup::LayerNorm,
            ],
        );
        let llama = tint_updated_params(&fixture("llama/tiny"), Some(2));
        assert_eq!(llama.top_layers, Some(2));
        assert_eq!(llama.groups, Some(values_outputs_mlps));
        let gpt2 = tint_updated_params(&fixture("aux/gpt2-tiny"), None);
        assert_eq!(gpt2.top_layers, None);
        assert_eq!(gpt2.groups, Some(with_norms));
    }
}
