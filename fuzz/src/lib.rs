//! The bodies of Lorekeeper's fuzz targets: one function per parser a user or a static host
//! can feed, each taking arbitrary bytes. A body returns normally for every input; a panic,
//! an overflow or an allocation the input could not justify is a bug.
//!
//! `fuzz/libfuzzer/` (cargo-fuzz, nightly) runs each body under libFuzzer with sanitizers
//! (`scripts/fuzz.sh`); this crate's test replays the kept inputs (`fuzz/regressions/TARGET/`,
//! the crashes found and fixed, and `fuzz/seeds/TARGET/`) on stable in every `./test.sh` run.
//!
//! Where a file carries a checksum or a hash, the body re-seals mutated bytes so that the
//! fuzzer reaches the checks behind it rather than stopping at the checksum.

use lorekeeper_engine::answer::evidence::Evidence;
use lorekeeper_engine::answer::modes::{parse_react, parse_refiner};
use lorekeeper_engine::answer::recover::parse_action;
use lorekeeper_engine::answer::validate::{answer_problems, check, repeated_span, Caps};
use lorekeeper_engine::format::bundle::Manifest;
use lorekeeper_engine::format::e5s1::E5s1;
use lorekeeper_engine::format::encoder::BertConfig;
use lorekeeper_engine::format::gguf::Gguf;
use lorekeeper_engine::format::weights::{shard_names, GgufSource, Safetensors, WeightSource};
use lorekeeper_engine::models::{llama, ModelConfig};
use lorekeeper_engine::retrieval::corpus::{CorpusFormat, IngestOptions};
use lorekeeper_engine::retrieval::{chunk_corpus, frame, ChunkConfig, Sources, StoryIndex};
use lorekeeper_engine::tokenizer::Tokenizer;

/// A fuzz target: its name (the folder of its kept inputs) and its body.
pub struct Target {
    /// `gguf`, `safetensors`, … (also the cargo-fuzz target's name).
    pub name: &'static str,
    /// Runs one input.
    pub body: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "gguf",
        body: gguf,
    },
    Target {
        name: "safetensors",
        body: safetensors,
    },
    Target {
        name: "config",
        body: config,
    },
    Target {
        name: "manifest",
        body: manifest,
    },
    Target {
        name: "e5s1",
        body: e5s1,
    },
    Target {
        name: "index",
        body: index,
    },
    Target {
        name: "corpus",
        body: corpus,
    },
    Target {
        name: "action",
        body: action,
    },
];

/// Elements dequantized per tensor at most (a real file's tensors are larger, but the fuzzer's
/// inputs are small; the bound keeps one execution cheap, not the reader safe).
const MAX_DEQUANT: usize = 1 << 20;

/// A GGUF file: header, metadata, tensor directory; then every tensor dequantized, the
/// tokenizer in its metadata, the file read as a weight source (HF names) and its model
/// configuration.
pub fn gguf(data: &[u8]) {
    let Ok(g) = Gguf::parse("fuzz.gguf", data.to_vec()) else {
        return;
    };
    for t in &g.tensors {
        if t.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) <= Some(MAX_DEQUANT as u64) {
            let _ = g.dequantize(t);
        }
    }
    let _ = Tokenizer::from_gguf(&g);
    if let Ok(src) = GgufSource::new(g) {
        let _ = src.describe();
        // The blocks kept as they are (Q4_0/Q4_1 → lq4h, Q5_0/Q5_1/Q8_0 → q8_0), q/k unpermuted.
        for name in [
            "model.embed_tokens.weight",
            "model.layers.0.self_attn.q_proj.weight",
            "model.layers.0.self_attn.k_proj.weight",
            "model.layers.0.mlp.down_proj.weight",
        ] {
            if let Ok(Some(parts)) = src.q4_parts(name) {
                for (_, m) in parts {
                    if m.validate(name).is_ok() && m.rows > 0 {
                        m.dequantize_row(m.rows - 1, &mut vec![0.0; m.cols]);
                    }
                }
            }
        }
        if let Ok(cfg) = llama::Config::from_gguf(&src) {
            model_config(&ModelConfig::Llama(cfg));
        }
    }
}

/// Safetensors shards: the first byte splits the input into two shards (the second may be
/// empty); every tensor is read. Then the input as a `model.safetensors.index.json`.
pub fn safetensors(data: &[u8]) {
    let (split, rest) = match data.split_first() {
        Some((&s, rest)) => (s as usize * rest.len() / 255, rest),
        None => return,
    };
    let (a, b) = rest.split_at(split.min(rest.len()));
    let shards = vec![("a.safetensors".to_string(), a.to_vec())]
        .into_iter()
        .chain((!b.is_empty()).then(|| ("b.safetensors".to_string(), b.to_vec())))
        .collect();
    if let Ok(st) = Safetensors::from_shards("fuzz", shards) {
        let names: Vec<String> = st.names().map(String::from).collect();
        for n in names {
            let _ = st.get(&n);
        }
    }
    let _ = shard_names("model.safetensors.index.json", data);
}

/// A model `config.json` (Llama, Qwen3, Qwen3.5) and an encoder's: parsed, validated, and the
/// sizes derived from them (tensor shapes, state bytes at the worker's context).
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = ModelConfig::from_json("config.json", text) {
        model_config(&cfg);
    }
    if let Ok(b) = BertConfig::from_json("config.json", text) {
        let _ = b.head_dim();
        let _ = b.tensor_shapes();
    }
}

fn model_config(cfg: &ModelConfig) {
    let _ = cfg.tensor_shapes();
    let _ = cfg.vocab_size();
    let _ = cfg.eos_ids();
    let _ = cfg.state_bytes(4096);
}

/// A bundle's `manifest.json`, and the model configuration it carries.
pub fn manifest(data: &[u8]) {
    let Ok(m) = Manifest::parse("manifest.json", data) else {
        return;
    };
    if let Some(model) = &m.model {
        if let Ok(cfg) = ModelConfig::from_json("manifest.json", &model.config.to_string()) {
            model_config(&cfg);
        }
    }
}

/// An E5S1 encoder file (the multilingual-e5 bundle part).
pub fn e5s1(data: &[u8]) {
    let _ = E5s1::parse("fuzz.e5s1", data.to_vec());
}

/// A story index blob. An input whose first byte is odd is framed as a payload (magic,
/// version, length, checksum put right) so that mutations reach the payload's checks; then
/// the index, once read, is searched.
pub fn index(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let blob = if mode & 1 == 1 {
        frame(rest)
    } else {
        rest.to_vec()
    };
    let Ok(ix) = StoryIndex::from_bytes(&blob) else {
        return;
    };
    let dim = ix.dense().map(|d| d.dim()).unwrap_or(0);
    let q = vec![0.5f32; dim];
    let text = "the white rabbit 白兔 ran";
    // The lexicon's expansion, with word vectors of the lexicon's width (and one of another).
    let width = ix.lexicon().map_or(dim, |l| l.dim());
    let words: Vec<(String, Vec<f32>)> = ix
        .expansion_words(text)
        .into_iter()
        .enumerate()
        .map(|(i, w)| (w, vec![0.3f32; width + usize::from(i == 2)]))
        .collect();
    for sources in [
        Sources::ALL,
        Sources::SPARSE,
        Sources::GRAPH,
        Sources::DENSE,
    ] {
        let _ = ix.search(text, Some(&q), 5, sources);
        let _ = ix.search_expanded(text, Some(&q), &words, 5, sources);
    }
    let _ = ix.to_bytes();
}

/// A corpus file: the first byte picks the format (text, Markdown, JSONL) and commentary
/// stripping; the rest is ingested and chunked.
pub fn corpus(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (name, format) = match mode % 3 {
        0 => ("story.txt", CorpusFormat::Text),
        1 => ("story.md", CorpusFormat::Markdown),
        _ => ("story.jsonl", CorpusFormat::Jsonl),
    };
    let options = IngestOptions {
        format: Some(format),
        strip_commentary: mode & 4 != 0,
        ..IngestOptions::default()
    };
    let config = ChunkConfig {
        max_chars: 40 + (mode as usize >> 3) * 16,
        ..ChunkConfig::default()
    };
    let _ = chunk_corpus(&[(name, rest)], &options, &config);
}

/// Model output: the action JSON (strict and recovered), the refiner's and ReAct's formats,
/// and the validator against two passages.
pub fn action(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let evidence = [
        Evidence {
            id: "E1".into(),
            chunk: 0,
            chapter: "CHAPTER I".into(),
            text: "Alice was beginning to get very tired of sitting by her sister on the bank, \
                   when suddenly a White Rabbit with pink eyes ran close by her."
                .into(),
            fusion_score: 0.5,
        },
        Evidence {
            id: "E2".into(),
            chunk: 1,
            chapter: "第一回".into(),
            text: "甄士隐梦幻识通灵，贾雨村风尘怀闺秀。".into(),
            fusion_score: 0.25,
        },
    ];
    let (parsed, _) = parse_action(&text);
    if let Some(a) = parsed {
        let _ = check(&a, &evidence, &Caps::default(), "Who ran by Alice?");
        let _ = answer_problems(&a, &evidence);
    }
    let _ = parse_refiner(&text);
    let _ = parse_react(&text);
    let _ = repeated_span(&text);
}
