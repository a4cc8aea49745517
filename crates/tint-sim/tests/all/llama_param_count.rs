//! Parameter count of the LLaMA TinT simulator: the built simulator, the count from the
//! constructed modules and the closed form agree exactly (tiny fixtures, SmolLM2-135M sizes); the
//! SmolLM2 numbers are printed next to the paper's OPT-125M row (`--nocapture`).
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::PathBuf;
use tint_sim::StepConfig;

use burn::backend::Flex;
use tint_sim::llama::param_count::{closed_form_param_count, module_param_count, LlamaSizes};
use tint_sim::llama::{LlamaParams, LlamaSimulator, LlamaSimulatorConfig, LlamaTintConfig};
use tint_sim::param_count::paper_param_count;
use tint_sim::Execution;

fn step(n_sim: usize, steps: usize) -> LlamaTintConfig {
    LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(n_sim),
            n_forward_backward: steps,
            ..StepConfig::default()
        },
        ..Default::default()
    }
}

#[test]
fn built_simulator_modules_and_closed_form_agree_on_the_tiny_fixtures() {
    for (name, n_sim, steps) in [("tiny", 1, 1), ("tiny_tied", 2, 2)] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/llama")
            .join(name);
        let model = tint_aux::load_model::<Flex>(&dir, &Default::default()).unwrap();
        let config = LlamaSimulatorConfig::for_model(64, 4, step(n_sim, steps));
        let simulator = LlamaSimulator::new(&model, config.clone()).unwrap();
        let sizes = LlamaSizes::of(&LlamaParams::from_aux(&model).unwrap());
        assert_eq!(sizes.tied, name == "tiny_tied");
        let closed = closed_form_param_count(&sizes, &config).unwrap();
        let modules = module_param_count::<Flex>(&sizes, &config, &Default::default()).unwrap();
        assert_eq!(closed, modules, "{name}");
        assert_eq!(simulator.num_params(), closed.total, "{name}");
        // The structured execution (which keeps the lower layers as plain weights) counts the
        // same constructed network.
        let structured = LlamaSimulator::new(
            &model,
            LlamaSimulatorConfig {
                execution: Execution::Structured,
                ..config.clone()
            },
        )
        .unwrap();
        assert_eq!(structured.num_params(), closed.total, "{name}, structured");
        assert_eq!(
            structured.num_params_read(),
            simulator.num_params_read(),
            "{name}, structured"
        );
        // One more simulated layer adds one backward and one final-forward copy per step.
        let more = LlamaSimulatorConfig::for_model(64, 4, step(2, steps));
        if n_sim == 1 {
            let grown = closed_form_param_count(&sizes, &more).unwrap();
            assert_eq!(
                grown.total - closed.total,
                steps * (closed.backward_modules + closed.forward_modules)
            );
        }
    }
}

#[test]
fn smollm2_135m_count_from_modules_equals_the_closed_form() {
    let sizes = LlamaSizes::smollm2_135m();
    assert_eq!(sizes.auxiliary_params(), 134_515_008, "SmolLM2-135M");
    for n_sim in [30, 2] {
        let config = LlamaSimulatorConfig::for_model(576, 9, step(n_sim, 1));
        assert_eq!(
            (config.hidden_size, config.num_prefixes, config.num_heads),
            (2880, 144, 45)
        );
        let closed = closed_form_param_count(&sizes, &config).unwrap();
        let modules = module_param_count::<Flex>(&sizes, &config, &Default::default()).unwrap();
        assert_eq!(closed, modules);
        eprintln!(
            "SmolLM2-135M TinT (D_sim = 2880, P = 144, H_sim = 45, Tmax = 1904, n_sim = {n_sim}, \
             1 step): {} parameters ({:.2}B; FM {}, BM {}, GM {}, prefix blocks/layer {}; \
             auxiliary {})",
            closed.total,
            closed.total as f64 / 1e9,
            closed.forward_modules,
            closed.backward_modules,
            closed.gradient_module,
            closed.prefix_per_layer,
            sizes.auxiliary_params()
        );
    }
    // The paper's analytic count (Table 3 formula) for OPT-125M and for SmolLM2-sized TinT
    // (D_sim = 4 D, H_sim = H, T_sim = 2048 + D / 4).
    let opt = paper_param_count(4 * 768, 12, 2048 + 768 / 4, 12);
    let smol = paper_param_count(4 * 576, 9, 2048 + 576 / 4, 30);
    eprintln!(
        "paper formula: OPT-125M {} ({:.2}B, the paper's row: 1.2B); SmolLM2-135M {} ({:.2}B)",
        opt.total,
        opt.total as f64 / 1e9,
        smol.total,
        smol.total as f64 / 1e9
    );
}
