//! The Contextually Guided Transformer ([`CgtModel`]) and its forward passes.

use burn::module::Module;
use burn::nn::{Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use crate::attention::attention_bias;
use crate::block::{DualBlock, XBlock};
use crate::config::CgtConfig;
use crate::embedding::{CgtInput, InputEmbedding};
use crate::error::{CgtError, Result};

/// The context summary `y^l` read out at the readout layer.
#[derive(Clone, Debug)]
pub struct ContextSummary<B: Backend> {
    /// `y^l` (the mean `mu` in the VAE variant), `[batch_size, seq_length, d_y]`.
    pub mean: Tensor<B, 3>,
    /// VAE variant only: `log sigma^2`, `[batch_size, seq_length, d_y]`.
    pub log_var: Option<Tensor<B, 3>>,
}

/// Result of a dynamic-`y` forward pass.
#[derive(Clone, Debug)]
pub struct CgtOutput<B: Backend> {
    /// Next-token logits (or regression outputs), `[batch_size, seq_length, output_size]`.
    pub logits: Tensor<B, 3>,
    /// The context summary (absent for the baseline).
    pub context: Option<ContextSummary<B>>,
}

/// What the layers up to the readout layer compute ([`CgtModel::lower_pass`]).
#[derive(Clone, Debug)]
pub struct LowerPass<B: Backend> {
    /// The context summary `y^l`.
    pub context: ContextSummary<B>,
    /// The `x` stream after the readout layer, causal attention without `key_start`,
    /// `[batch_size, seq_length, d_x]`.
    pub x: Tensor<B, 3>,
}

/// A causal transformer with an `x` stream and, below the readout layer, a `y` stream whose value `y^l`
/// generates the operators of every later layer (paper: Zhmoginov et al., "Contextually Guided
/// Transformer"). With `readout_layer = 0` it is a plain GPT-2 style transformer.
/// Should be created with [`CgtModel::new`].
#[derive(Module, Debug)]
pub struct CgtModel<B: Backend> {
    /// Embedding of the `x` stream.
    pub x_embedding: InputEmbedding<B>,
    /// Embedding of the `y` stream (CGT only).
    pub y_embedding: Option<InputEmbedding<B>>,
    /// Two-stream layers `1..=l`.
    pub lower: Vec<DualBlock<B>>,
    /// `x`-only layers `l+1..=L` (all layers of a baseline or folded model).
    pub upper: Vec<XBlock<B>>,
    /// VAE variant: `log sigma^2 = W y^l + b`.
    pub y_log_var: Option<Linear<B>>,
    /// Final norm on `x`.
    pub final_norm: LayerNorm<B>,
    /// Readout `[d_x, output_size]`.
    pub head: Linear<B>,
    /// Sequence length limit.
    pub max_seq_len: usize,
}

impl<B: Backend> CgtModel<B> {
    /// Builds a randomly initialised model after validating the config.
    ///
    /// Parameters are materialised here (burn initialises lazily), so clones of a new model hold the same
    /// weights, which resumable and comparative training rely on.
    pub fn new(config: &CgtConfig, device: &B::Device) -> Result<Self> {
        config.validate()?;
        let record = Self::build(config, device).into_record();
        Ok(Self::build(config, device).load_record(record))
    }

    fn build(config: &CgtConfig, device: &B::Device) -> Self {
        let guided = config.is_guided();
        let vocab = config.token_vocab();
        let init = Initializer::Normal {
            mean: 0.0,
            std: config.init_std,
        };
        let embedding = |width| {
            InputEmbedding::new(
                config.input,
                vocab,
                width,
                config.max_seq_len,
                config.init_std,
                device,
            )
        };
        let n_lower = config.readout_layer;
        Self {
            x_embedding: embedding(config.d_x),
            y_embedding: guided.then(|| embedding(config.d_y)),
            lower: (0..n_lower)
                .map(|_| DualBlock::new(config, device))
                .collect(),
            upper: (n_lower..config.n_layers)
                .map(|_| XBlock::new(config, guided, device))
                .collect(),
            y_log_var: (guided && config.vae).then(|| {
                LinearConfig::new(config.d_y, config.d_y)
                    .with_initializer(init.clone())
                    .init(device)
            }),
            final_norm: LayerNormConfig::new(config.d_x).init(device),
            head: LinearConfig::new(config.d_x, config.output_size)
                .with_initializer(init)
                .init(device),
            max_seq_len: config.max_seq_len,
        }
    }

    /// True when the model has a `y` stream.
    pub fn is_guided(&self) -> bool {
        self.y_embedding.is_some()
    }

    /// Reports an input that does not fit the model as an error.
    pub fn check_input(&self, input: &CgtInput<B>) -> Result<()> {
        let (_, seq_length) = input.batch_and_length();
        if seq_length == 0 || seq_length > self.max_seq_len {
            return Err(CgtError::Shape(format!(
                "sequence length {seq_length} outside 1..={}",
                self.max_seq_len
            )));
        }
        let kind_matches = match input {
            CgtInput::Tokens(_) => self.x_embedding.tokens.is_some(),
            CgtInput::Vectors(vectors) => {
                self.x_embedding.vector_width() == Some(vectors.dims()[2])
            }
        };
        if !kind_matches {
            return Err(CgtError::Shape(
                "input kind or vector width does not match the model".into(),
            ));
        }
        Ok(())
    }

    /// Runs the two-stream layers and returns the context summary `y^l`.
    ///
    /// # Shapes
    /// - output: `mean`, `log_var`: `[batch_size, seq_length, d_y]`
    pub fn context(&self, input: &CgtInput<B>) -> Result<ContextSummary<B>> {
        Ok(self.lower_pass(input)?.context)
    }

    /// Runs the two-stream layers and returns the context summary `y^l` together with the `x` stream
    /// they produce, so that a pass reading `y^l` can continue `x` from there ([`Self::upper_pass`])
    /// instead of recomputing the layers up to the readout layer: the `x` half of a two-stream
    /// block never reads `y`, so that `x` is the one [`Self::forward_x_path`] computes without a
    /// `key_start`.
    ///
    /// # Shapes
    /// - output: `context.mean`, `context.log_var`: `[batch_size, seq_length, d_y]`; `x`:
    ///   `[batch_size, seq_length, d_x]`
    pub fn lower_pass(&self, input: &CgtInput<B>) -> Result<LowerPass<B>> {
        self.check_input(input)?;
        let y_embedding = self.y_embedding.as_ref().ok_or(CgtError::NoContextStream)?;
        let (_, seq_length) = input.batch_and_length();
        let bias = attention_bias::<B>(seq_length, None, &input.device());
        let mut x = self.x_embedding.forward(input);
        let mut y = y_embedding.forward(input);
        for block in &self.lower {
            (x, y) = block.forward(x, y, bias.clone());
        }
        let log_var = self.y_log_var.as_ref().map(|map| map.forward(y.clone()));
        Ok(LowerPass {
            context: ContextSummary { mean: y, log_var },
            x,
        })
    }

    /// Continues the `x` stream of a [`LowerPass`] through the guided layers with the given `y`
    /// (dynamic or frozen) and returns the logits: the same values as
    /// `forward_x_path(input, Some(context), None)`, without recomputing the lower layers.
    ///
    /// # Shapes
    /// - `lower_x`: `[batch_size, seq_length, d_x]` ([`LowerPass::x`])
    /// - `context`: `[batch_size, seq_length, d_y]` (dynamic) or `[batch_size, 1, d_y]` (frozen)
    /// - output: `[batch_size, seq_length, output_size]`
    pub fn upper_pass(&self, lower_x: Tensor<B, 3>, context: Tensor<B, 3>) -> Result<Tensor<B, 3>> {
        if !self.is_guided() {
            return Err(CgtError::NoContextStream);
        }
        let [batch_size, seq_length, _] = lower_x.dims();
        self.check_context(&context, batch_size, seq_length)?;
        let bias = attention_bias::<B>(seq_length, None, &lower_x.device());
        Ok(self.upper_and_head(lower_x, Some(&context), bias))
    }

    /// Reports a `y` whose shape does not fit a batch of `batch_size` sequences of `seq_length`.
    fn check_context(
        &self,
        context: &Tensor<B, 3>,
        batch_size: usize,
        seq_length: usize,
    ) -> Result<()> {
        let [b, n, _] = context.dims();
        if b != batch_size || (n != 1 && n != seq_length) {
            return Err(CgtError::Shape(format!(
                "context of shape {:?} does not fit a batch of {batch_size} x {seq_length}",
                context.dims()
            )));
        }
        Ok(())
    }

    /// The layers above the readout layer, the final norm and the head.
    ///
    /// # Shapes
    /// - `x`: `[batch_size, seq_length, d_x]`; `context` as in [`Self::upper_pass`]
    /// - output: `[batch_size, seq_length, output_size]`
    fn upper_and_head(
        &self,
        mut x: Tensor<B, 3>,
        context: Option<&Tensor<B, 3>>,
        bias: Tensor<B, 4>,
    ) -> Tensor<B, 3> {
        for block in &self.upper {
            x = block.forward(x, context, bias.clone());
        }
        self.head.forward(self.final_norm.forward(x))
    }

    /// The ordinary forward pass with dynamic (per-position) `y` (the VAE mean, no sampling).
    ///
    /// # Shapes
    /// - `input`: `[batch_size, seq_length]` tokens or `[batch_size, seq_length, d_input]` vectors
    /// - output: `logits`: `[batch_size, seq_length, output_size]`
    pub fn forward(&self, input: &CgtInput<B>) -> Result<CgtOutput<B>> {
        self.forward_impl(input, None)
    }

    /// VAE training pass: `y = mu + exp(log_var / 2) * noise` (reparameterisation).
    ///
    /// # Shapes
    /// - `noise`: `[batch_size, seq_length, d_y]`, standard normal
    /// - output: `logits`: `[batch_size, seq_length, output_size]`
    pub fn forward_sampled(
        &self,
        input: &CgtInput<B>,
        noise: Tensor<B, 3>,
    ) -> Result<CgtOutput<B>> {
        self.forward_impl(input, Some(noise))
    }

    fn forward_impl(
        &self,
        input: &CgtInput<B>,
        noise: Option<Tensor<B, 3>>,
    ) -> Result<CgtOutput<B>> {
        if !self.is_guided() {
            let logits = self.forward_x_path(input, None, None)?;
            return Ok(CgtOutput {
                logits,
                context: None,
            });
        }
        let LowerPass { context, x } = self.lower_pass(input)?;
        let y = match (&context.log_var, noise) {
            (Some(log_var), Some(noise)) => {
                context.mean.clone() + log_var.clone().mul_scalar(0.5).exp() * noise
            }
            _ => context.mean.clone(),
        };
        let logits = self.upper_pass(x, y)?;
        Ok(CgtOutput {
            logits,
            context: Some(context),
        })
    }

    /// Runs the `x` stream alone with an externally given `y` (frozen or dynamic), optionally hiding,
    /// per sample, every token before `key_start[b]` from attention. This is the auxiliary model and the
    /// specialised model; for a baseline pass `context = None`.
    ///
    /// # Shapes
    /// - `context`: `[batch_size, seq_length, d_y]` (dynamic) or `[batch_size, 1, d_y]` (frozen)
    /// - `key_start`: `batch_size` positions
    /// - output: `[batch_size, seq_length, output_size]`
    pub fn forward_x_path(
        &self,
        input: &CgtInput<B>,
        context: Option<Tensor<B, 3>>,
        key_start: Option<&[usize]>,
    ) -> Result<Tensor<B, 3>> {
        self.check_input(input)?;
        let (batch_size, seq_length) = input.batch_and_length();
        if self.is_guided() != context.is_some() {
            return Err(if self.is_guided() {
                CgtError::Shape("a CGT model needs a context y for its x path".into())
            } else {
                CgtError::NoContextStream
            });
        }
        if let Some(context) = &context {
            self.check_context(context, batch_size, seq_length)?;
        }
        if let Some(starts) = key_start {
            if starts.len() != batch_size || starts.iter().any(|&s| s >= seq_length) {
                return Err(CgtError::Shape(format!(
                    "key_start {starts:?} must hold {batch_size} positions below {seq_length}"
                )));
            }
        }
        let bias = attention_bias::<B>(seq_length, key_start, &input.device());
        let mut x = self.x_embedding.forward(input);
        for block in &self.lower {
            x = block.x_block.forward(x, None, bias.clone());
        }
        Ok(self.upper_and_head(x, context.as_ref(), bias))
    }

    /// The "informed" model: `y` kept as a moving average
    /// `y_used_i = (1 - rate) y_used_{i-1} + rate y_computed_i`, starting from `y_used_0 = initial`.
    ///
    /// # Shapes
    /// - `initial`: `[batch_size, d_y]`
    /// - output: `[batch_size, seq_length, output_size]`
    pub fn forward_moving_average(
        &self,
        input: &CgtInput<B>,
        initial: Tensor<B, 2>,
        rate: f64,
    ) -> Result<Tensor<B, 3>> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(CgtError::InvalidConfig(format!(
                "moving-average rate {rate} outside [0, 1]"
            )));
        }
        let LowerPass {
            context,
            x: lower_x,
        } = self.lower_pass(input)?;
        let computed = context.mean;
        let [batch_size, seq_length, d_y] = computed.dims();
        let device = computed.device();
        // y_used = W y_computed + w0 initial, with W lower-triangular.
        let mut weights = vec![0.0f32; seq_length * seq_length];
        let mut initial_weights = vec![0.0f32; seq_length];
        for i in 0..seq_length {
            initial_weights[i] = (1.0 - rate).powi(i as i32) as f32;
            for j in 1..=i {
                weights[i * seq_length + j] = (rate * (1.0 - rate).powi((i - j) as i32)) as f32;
            }
        }
        let weights =
            Tensor::<B, 2>::from_data(TensorData::new(weights, [seq_length, seq_length]), &device);
        let initial_weights =
            Tensor::<B, 1>::from_data(TensorData::new(initial_weights, [seq_length]), &device);
        let mixed = weights
            .unsqueeze::<3>()
            .expand([batch_size, seq_length, seq_length])
            .matmul(computed);
        let start = initial_weights
            .reshape([1, seq_length, 1])
            .expand([batch_size, seq_length, d_y])
            * initial
                .unsqueeze_dim::<3>(1)
                .expand([batch_size, seq_length, d_y]);
        self.upper_pass(lower_x, mixed + start)
    }
}
