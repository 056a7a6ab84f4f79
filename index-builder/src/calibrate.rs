//! Calibration for importance-weighted LQ4 (`index-builder model --calibration TEXT`): the base
//! model runs in f32 on the CPU over the first tokens of a text, and every matmul's input columns
//! are measured ([`lorekeeper_engine::cpu::importance`]); the quantizer then weighs each
//! column's rounding error by that mean square (llama.cpp's importance matrix, computed here
//! rather than brought as a file).
//!
//! The base model is measured before any LoRA merge (the engine loads the base); the merged
//! weights differ from it by a low-rank update, so its activations are close to theirs.

use std::path::Path;

use lorekeeper_engine::cpu::importance::{self, ImportanceMap};
use lorekeeper_engine::cpu::CpuBackend;
use lorekeeper_engine::models::WeightFormat;

use crate::error::{BuildError, Result};

/// Tokens per forward pass.
const CHUNK: usize = 64;

/// What the calibration read and measured.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// Per tensor, the mean square of its input columns.
    pub importance: ImportanceMap,
    /// Tokens run.
    pub tokens: usize,
}

/// Runs the model at `base` (GGUF or Hugging Face folder) in f32 over the first `tokens`
/// tokens of `text`, in windows of `window` tokens (each from an empty context, every
/// position's LM head computed), and returns each matmul weight's column importances.
pub fn calibrate(base: &Path, text: &Path, tokens: usize, window: usize) -> Result<Calibration> {
    if tokens < 2 || window < 2 {
        return Err(BuildError::Input {
            file: text.display().to_string(),
            detail: format!(
                "calibration needs at least 2 tokens and a window of 2 (got {tokens}, {window})"
            ),
        });
    }
    let bytes = std::fs::read(text).map_err(|e| BuildError::io(text, e))?;
    let s = String::from_utf8(bytes).map_err(|e| BuildError::Input {
        file: text.display().to_string(),
        detail: format!(
            "calibration text is not UTF-8 (first bad byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })?;
    let b = CpuBackend;
    let (run, importance) = importance::collect(|| -> Result<usize> {
        let (mut model, tok) = lorekeeper_engine::loader::load(
            &b,
            base,
            Some(WeightFormat::F32),
            window,
            CHUNK,
            None,
        )?;
        let mut ids = tok.encode(&s)?;
        ids.truncate(tokens);
        if ids.len() < 2 {
            return Err(BuildError::Input {
                file: text.display().to_string(),
                detail: format!("calibration text has {} token(s)", ids.len()),
            });
        }
        for w in ids.chunks(window) {
            model.reset(&b)?;
            for piece in w.chunks(CHUNK) {
                model.forward(&b, piece, true)?;
            }
        }
        Ok(ids.len())
    });
    let tokens = run?;
    if importance.tensors.is_empty() {
        return Err(BuildError::Input {
            file: base.display().to_string(),
            detail: "calibration measured no matmul (the model ran no f32 matmul on the CPU)"
                .into(),
        });
    }
    Ok(Calibration { importance, tokens })
}
