//! Replays every kept input of every fuzz target on stable: the seeds the fuzzer starts from
//! (`fuzz/seeds/TARGET/`) and the inputs that once crashed a parser (`fuzz/regressions/TARGET/`,
//! each fixed since). A body that panics fails the test, naming the file.

use std::path::{Path, PathBuf};

use lorekeeper_fuzz::TARGETS;

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(kind)
        .join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    v
}

fn replay(name: &str) {
    let t = TARGETS
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no fuzz target '{name}'"));
    let seeds = inputs("seeds", name);
    assert!(!seeds.is_empty(), "fuzz/seeds/{name}/ holds no seed");
    for p in seeds.iter().chain(&inputs("regressions", name)) {
        let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let r = std::panic::catch_unwind(|| (t.body)(&bytes));
        assert!(r.is_ok(), "fuzz target '{name}' panics on {}", p.display());
    }
}

macro_rules! replay_tests {
    ($($t:ident),*) => {$(
        #[test]
        fn $t() {
            replay(stringify!($t));
        }
    )*};
}

replay_tests!(
    gguf,
    safetensors,
    config,
    manifest,
    e5s1,
    index,
    corpus,
    action
);

#[test]
fn every_target_is_replayed() {
    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "gguf",
            "safetensors",
            "config",
            "manifest",
            "e5s1",
            "index",
            "corpus",
            "action"
        ]
    );
}

/// The seeds are valid files, so the fuzzer starts from inputs that reach every check.
#[test]
fn seeds_are_valid_files() {
    use lorekeeper_engine::format::bundle::Manifest;
    use lorekeeper_engine::format::e5s1::E5s1;
    use lorekeeper_engine::format::gguf::Gguf;
    use lorekeeper_engine::format::weights::{GgufSource, Safetensors, WeightSource};
    use lorekeeper_engine::models::{llama, ModelConfig};
    use lorekeeper_engine::retrieval::StoryIndex;
    use lorekeeper_engine::tokenizer::Tokenizer;
    let read = |p: &PathBuf| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let name = |p: &PathBuf| p.display().to_string();
    for p in inputs("seeds", "gguf") {
        let g = Gguf::parse(&name(&p), read(&p)).unwrap_or_else(|e| panic!("{e}"));
        for t in &g.tensors {
            g.dequantize(t).unwrap_or_else(|e| panic!("{e}"));
        }
        Tokenizer::from_gguf(&g).unwrap_or_else(|e| panic!("{e}"));
        let src = GgufSource::new(g).unwrap_or_else(|e| panic!("{e}"));
        llama::Config::from_gguf(&src).unwrap_or_else(|e| panic!("{e}"));
        // The quantized matrices come back as blocks with the dequantized values.
        for n in [
            "model.embed_tokens.weight",
            "model.layers.0.self_attn.k_proj.weight",
        ] {
            let parts = src.q4_parts(n).unwrap_or_else(|e| panic!("{e}"));
            let m = &parts.unwrap_or_else(|| panic!("{n}: no blocks"))[0].1;
            let want = src.get(n).unwrap_or_else(|e| panic!("{e}")).map(|t| t.data);
            assert!(Some(m.dequantize()) == want, "{}: {n}", name(&p));
        }
    }
    let st = inputs("seeds", "safetensors");
    let whole = st
        .iter()
        .find(|p| !name(p).ends_with(".json"))
        .expect("a safetensors seed");
    Safetensors::from_shards("seed", vec![("s".into(), read(whole)[1..].to_vec())])
        .unwrap_or_else(|e| panic!("{e}"));
    for p in inputs("seeds", "config") {
        let text = String::from_utf8(read(&p)).expect("UTF-8");
        if !name(&p).contains("minilm") {
            ModelConfig::from_json(&name(&p), &text).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    for p in inputs("seeds", "manifest") {
        Manifest::parse(&name(&p), &read(&p)).unwrap_or_else(|e| panic!("{e}"));
    }
    for p in inputs("seeds", "index") {
        let b = read(&p);
        let blob = if b[0] & 1 == 1 {
            lorekeeper_engine::retrieval::frame(&b[1..])
        } else {
            b[1..].to_vec()
        };
        StoryIndex::from_bytes(&blob).unwrap_or_else(|e| panic!("{}: {e}", name(&p)));
    }
    for p in inputs("seeds", "e5s1") {
        E5s1::parse(&name(&p), read(&p)).unwrap_or_else(|e| panic!("{e}"));
    }
}
