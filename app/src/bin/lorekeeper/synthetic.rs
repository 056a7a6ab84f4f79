//! The synthetic models of `lorekeeper bench-arch`: the published configurations of the shapes
//! it times and random weights for every tensor they name. Written against the engine's public
//! API only (`lorekeeper_engine::…`), so that `scripts/page-arch` (the same models in the page)
//! compiles it too, against this engine or an older commit's (`scripts/bench-page-arch.sh`).

use lorekeeper_engine::format::weights::{HostTensor, WeightSource};
use lorekeeper_engine::models::ModelConfig;
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::Q4Matrix;

/// Qwen3-4B's `config.json` (the parts the model file reads).
pub const QWEN3_4B: &str = r#"{"model_type":"qwen3","vocab_size":151936,"hidden_size":2560,
"intermediate_size":9728,"num_hidden_layers":36,"num_attention_heads":32,"num_key_value_heads":8,
"head_dim":128,"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,
"max_position_embeddings":40960,"hidden_act":"silu"}"#;

/// SmolLM2-135M-Instruct's `config.json` (the parts the model file reads): the demo bundle's
/// model, small enough to time on a software rasteriser at long contexts.
pub const SMOLLM2_135M: &str = r#"{"model_type":"llama","vocab_size":49152,"hidden_size":576,
"intermediate_size":1536,"num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,
"head_dim":64,"rms_norm_eps":1e-5,"rope_theta":100000.0,"tie_word_embeddings":true,
"max_position_embeddings":8192,"hidden_act":"silu"}"#;

/// Qwen3.5-4B's text `config.json` (the parts the model file reads).
pub const QWEN35_4B: &str = r#"{"model_type":"qwen3_5_text","vocab_size":248320,"hidden_size":2560,
"intermediate_size":9216,"num_hidden_layers":32,"num_attention_heads":16,"num_key_value_heads":4,
"head_dim":256,"rms_norm_eps":1e-6,"rope_parameters":{"rope_type":"default","rope_theta":10000000.0,
"partial_rotary_factor":0.25},"tie_word_embeddings":true,"full_attention_interval":4,
"linear_conv_kernel_dim":4,"linear_key_head_dim":128,"linear_num_key_heads":16,
"linear_num_value_heads":32,"linear_value_head_dim":128,"hidden_act":"silu"}"#;

/// Random weights for every tensor a config names: LQ4 row blocks for matrices (a random
/// 256-row template repeated, blocks of at most 64 MiB so a GPU binding holds each), f32 for
/// the rest.
pub struct SyntheticWeights {
    shapes: std::collections::HashMap<String, Vec<usize>>,
}

impl SyntheticWeights {
    pub fn new(cfg: &ModelConfig) -> Self {
        SyntheticWeights {
            shapes: cfg.tensor_shapes().into_iter().collect(),
        }
    }

    fn seed(name: &str) -> u64 {
        name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    }
}

impl WeightSource for SyntheticWeights {
    fn describe(&self) -> String {
        "synthetic weights".into()
    }

    fn contains(&self, name: &str) -> bool {
        self.shapes.contains_key(name)
    }

    fn get(&self, name: &str) -> lorekeeper_engine::Result<Option<HostTensor>> {
        let Some(shape) = self.shapes.get(name) else {
            return Ok(None);
        };
        let n: usize = shape.iter().product();
        let mut rng = Pcg32::new(Self::seed(name));
        let data = if name.ends_with("A_log") {
            (0..n).map(|_| rng.uniform(1.0, 16.0).ln()).collect()
        } else if shape.len() == 1 {
            rng.normal_vec(n, 0.05)
        } else {
            rng.normal_vec(n, 0.02)
        };
        Ok(Some(HostTensor {
            shape: shape.clone(),
            data,
        }))
    }

    fn q4_parts(&self, name: &str) -> lorekeeper_engine::Result<Option<Vec<(usize, Q4Matrix)>>> {
        let Some(&[rows, cols]) = self.shapes.get(name).map(Vec::as_slice) else {
            return Ok(None);
        };
        if !cols.is_multiple_of(32) {
            return Ok(None);
        }
        let mut rng = Pcg32::new(Self::seed(name));
        let t_rows = rows.min(256);
        let template =
            Q4Matrix::quantize(name, t_rows, cols, &rng.normal_vec(t_rows * cols, 0.02))?;
        let bytes_per_row = template.data.len() * 4 / t_rows;
        let block_rows = ((64usize << 20) / bytes_per_row).max(t_rows) / t_rows * t_rows;
        let mut parts = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + block_rows).min(rows);
            let mut pieces = Vec::new();
            let mut r = r0;
            while r < r1 {
                let take = (r1 - r).min(t_rows);
                pieces.push(if take == t_rows {
                    template.clone()
                } else {
                    Q4Matrix::quantize(name, take, cols, &rng.normal_vec(take * cols, 0.02))?
                });
                r += take;
            }
            parts.push((r0, Q4Matrix::concat_rows(name, &pieces)?));
            r0 = r1;
        }
        Ok(Some(parts))
    }
}
