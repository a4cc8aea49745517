//! Load an auxiliary model and score a text, as a library user does: the committed micro GPT-2
//! (`fixtures/official-tint/micro-gpt2-random`, random weights, its own tokenizer) by default, or
//! any Hugging Face checkpoint directory with its tokenizer given as the first argument.
//!
//! ```sh
//! cargo run -p tint-aux --example score_text [MODEL_DIR] ["text to score"]
//! ```
#![allow(clippy::print_stdout)] // the example reports on the terminal

use std::path::PathBuf;

use burn::backend::Flex;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::loss::next_token_nll;
use tint_aux::{load_model, AuxTokenizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model_path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/official-tint/micro-gpt2-random")
    });
    let text = args
        .next()
        .unwrap_or_else(|| "The quick brown fox jumps over the lazy dog.".into());

    let device = Default::default();
    let model = load_model::<Flex>(&model_path, &device)?;
    let tokenizer = AuxTokenizer::from_dir(&model_path)?;
    let ids = tokenizer.encode(&text)?;
    if ids.len() < 2 {
        return Err(format!("{text:?} has {} token(s); scoring needs two", ids.len()).into());
    }
    let n = ids.len();
    let input = Tensor::<Flex, 2, Int>::from_data(
        TensorData::new(ids.iter().map(|&t| i64::from(t)).collect(), [1, n]),
        &device,
    );
    let logits = model.forward(input.clone())?; // [1, n, vocab_size]
    let nll: Vec<f32> = next_token_nll(logits, input).into_data().to_vec()?;
    let mean = nll.iter().map(|&x| f64::from(x)).sum::<f64>() / nll.len() as f64;
    println!(
        "{} ({} model, {} layers): {n} tokens, mean NLL {mean:.4} nats, perplexity {:.2}",
        model_path.display(),
        model.model_type(),
        model.n_layers(),
        mean.exp()
    );
    for (token, nll) in ids[1..].iter().zip(&nll) {
        println!(
            "  {:>16} {nll:7.3}",
            format!("{:?}", tokenizer.decode(&[*token])?)
        );
    }
    Ok(())
}
