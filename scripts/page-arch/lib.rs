//! `lorekeeper bench-arch`'s synthetic decoders on the page's WebGPU: the same shapes and random
//! weights (`app/src/bin/lorekeeper/synthetic.rs`, compiled in here), loaded on the adapter the
//! browser gives (headless Chromium: SwiftShader), moved to a context position, then greedy
//! decode steps timed with the page's clock, each read back as the app's worker reads a token.
//! Built for wasm32 by `scripts/bench-page-arch.sh` against this tree's engine or another
//! commit's (the file uses only the engine's public API, unchanged since the build issue 22 was
//! filed on).

use lorekeeper_engine::models::{Decoder, LoadOptions, ModelConfig, WeightFormat};
use lorekeeper_engine::{Backend, GpuContext, Requirements};
use wasm_bindgen::prelude::*;

#[path = "../../app/src/bin/lorekeeper/synthetic.rs"]
mod synthetic;

use synthetic::{SyntheticWeights, QWEN35_4B, QWEN3_4B, SMOLLM2_135M};

/// Untimed steps before the timed ones (pipelines compiled, caches touched).
const WARM_STEPS: usize = 2;

fn now_ms() -> f64 {
    js_sys::Date::now()
}

fn js(e: impl std::fmt::Display) -> JsValue {
    JsValue::from_str(&e.to_string())
}

/// Loads `model` (`qwen3-4b`, `qwen3.5-4b` or `smollm2`) with random LQ4 weights, moves it to
/// position `context` and times `gen` greedy decode steps. Returns one JSON object: the
/// adapter, seconds to load, decode tok/s and milliseconds per step.
#[wasm_bindgen]
pub async fn bench(model: String, context: u32, gen: u32) -> Result<String, JsValue> {
    let (label, text) = match model.as_str() {
        "qwen3-4b" => ("Qwen3-4B shape", QWEN3_4B),
        "qwen3.5-4b" => ("Qwen3.5-4B shape", QWEN35_4B),
        "smollm2" => ("SmolLM2-135M shape", SMOLLM2_135M),
        other => {
            return Err(js(format!(
                "unknown model {other:?} (qwen3-4b, qwen3.5-4b, smollm2)"
            )))
        }
    };
    if gen == 0 {
        return Err(js("gen must be positive"));
    }
    let (context, gen) = (context as usize, gen as usize);
    #[allow(unused_mut)]
    let mut b = GpuContext::new(Requirements::default()).await.map_err(js)?;
    #[cfg(feature = "verify")]
    let verified = b.verify_fused().await.map_err(js)?;
    #[cfg(not(feature = "verify"))]
    let verified: Option<String> = None;
    let cfg = ModelConfig::from_json(label, text).map_err(js)?;
    let src = SyntheticWeights::new(&cfg);
    let t0 = now_ms();
    let opts = LoadOptions {
        format: WeightFormat::Q4,
        ctx: context + gen + WARM_STEPS + 2,
        chunk: 1,
        kv: None,
    };
    let mut m = Decoder::load(&b, cfg, &src, opts).map_err(js)?;
    let v = m.vocab_size();
    m.reset(&b).map_err(js)?;
    m.seek_for_benchmark(&b, context).map_err(js)?;
    // The first step waits for the uploads: the load ends when it is read back.
    let mut tok = 1u32;
    for _ in 0..WARM_STEPS {
        m.forward(&b, &[tok], false).map_err(js)?;
        tok = b.select(m.logits().0, v, 1, None).await.map_err(js)?.top[0].0;
    }
    let load_s = (now_ms() - t0) / 1e3;
    let t = now_ms();
    for _ in 0..gen {
        m.forward(&b, &[tok], false).map_err(js)?;
        tok = b.select(m.logits().0, v, 1, None).await.map_err(js)?.top[0].0;
    }
    let s = (now_ms() - t) / 1e3;
    Ok(serde_json::json!({
        "model": label,
        "adapter": b.adapter_description(),
        "fused_check": verified,
        "context": context,
        "gen_tokens": gen,
        "load_and_warm_s": load_s,
        "decode_tok_s": gen as f64 / s,
        "ms_per_token": s * 1e3 / gen as f64,
    })
    .to_string())
}
