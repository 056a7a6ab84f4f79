//! What the page and the engine worker say to each other: JSON strings over `postMessage`,
//! one tagged object each (`{"type":"ask",…}`), so both sides share these types.

use lorekeeper_engine::answer::{Answer, AskConfig, Mode};
use serde::{Deserialize, Serialize};

/// The bundles a page offers (`bundles/index.json`, copied from `public/bundles/`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// Offered bundles, the first is the default.
    pub bundles: Vec<CatalogEntry>,
}

/// One bundle of the catalog.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// Stable id (chat history and settings are kept per id).
    pub id: String,
    /// Shown in the picker.
    pub title: String,
    /// Folder of `manifest.json` and the shards, relative to the page (e.g. `bundles/alice/`).
    pub path: String,
    /// One line about the story and the model.
    #[serde(default)]
    pub description: String,
    /// sha256 of the bundle's `manifest.json` (hex). When given, the worker refuses a manifest
    /// with other bytes, so the catalog pins the whole bundle (the manifest pins every shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
}

impl CatalogEntry {
    /// The folder with exactly one trailing slash.
    pub fn base(&self) -> String {
        format!("{}/", self.path.trim_end_matches('/'))
    }
}

/// Parses `bundles/index.json`, naming what is wrong.
pub fn parse_catalog(text: &str) -> Result<Catalog, String> {
    let c: Catalog = serde_json::from_str(text)
        .map_err(|e| format!("bundles/index.json is not a bundle list: {e}"))?;
    for (i, b) in c.bundles.iter().enumerate() {
        if b.id.trim().is_empty() || b.path.trim().is_empty() {
            return Err(format!(
                "bundles/index.json: bundle {} has an empty id or path",
                i + 1
            ));
        }
        check_bundle_path(&b.path).map_err(|why| {
            format!(
                "bundles/index.json: bundle '{}' has the path {:?}, which {why}; bundles are fetched same-origin only, by a path relative to the page or the site",
                b.id, b.path
            )
        })?;
        if let Some(h) = &b.manifest_sha256 {
            if h.len() != 64 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!(
                    "bundles/index.json: bundle '{}' has a manifest_sha256 that is not 64 hex digits",
                    b.id
                ));
            }
        }
    }
    Ok(c)
}

/// Checks that a catalog path can only name a folder on this site: no scheme (`https:`,
/// `data:`, `javascript:`, `https:evil.example`), no network-path reference (`//host`, and
/// `/\host`, `\\host`, which browsers read the same way), no backslash at all, no control
/// character or whitespace (browsers strip some of them before parsing). The worker checks
/// the resolved address's origin again before it fetches.
pub fn check_bundle_path(path: &str) -> Result<(), &'static str> {
    if path.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("holds a control character or whitespace");
    }
    if path.contains('\\') {
        return Err("holds a backslash");
    }
    if path.starts_with("//") {
        return Err("names another host");
    }
    let first = path.split(['/', '?', '#']).next().unwrap_or_default();
    if first.contains(':') {
        return Err("starts with a scheme");
    }
    Ok(())
}

/// What the reader controls per question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Answer protocol.
    pub mode: Mode,
    /// Sampling temperature (0 = greedy).
    pub temperature: f32,
    /// Most tokens generated per round.
    pub max_tokens: usize,
    /// Sampling seed (the same seed gives the same tokens as `lorekeeper ask --seed`).
    pub seed: u64,
    /// Constrained decoding (off: free decoding with truncation recovery).
    pub grammar: bool,
}

impl Default for Settings {
    fn default() -> Self {
        let cfg = AskConfig::default();
        Settings {
            mode: cfg.mode,
            temperature: cfg.sampling.temperature,
            max_tokens: 512,
            seed: 0,
            grammar: cfg.grammar,
        }
    }
}

impl Settings {
    /// These settings over ASA's defaults.
    pub fn apply(&self, cfg: &mut AskConfig) {
        cfg.mode = self.mode;
        cfg.sampling.temperature = self.temperature;
        cfg.sampling.seed = self.seed;
        cfg.max_tokens = self.max_tokens;
        cfg.grammar = self.grammar;
    }

    /// The settings in range, or what is out of range.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=2.0).contains(&self.temperature) || !self.temperature.is_finite() {
            return Err(format!(
                "temperature {} is outside 0 to 2",
                self.temperature
            ));
        }
        if !(1..=4096).contains(&self.max_tokens) {
            return Err(format!(
                "max tokens {} is outside 1 to 4096",
                self.max_tokens
            ));
        }
        Ok(())
    }
}

/// Where the worker runs the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// The CPU path (wasm SIMD) unless a hardware GPU measures faster; software adapters
    /// (SwiftShader) never win.
    #[default]
    Auto,
    /// WebGPU, whatever the adapter.
    Gpu,
    /// The CPU path.
    Cpu,
}

impl BackendChoice {
    /// From the page's query string (`?backend=gpu|cpu|auto`); anything else is auto.
    pub fn from_query(search: &str) -> BackendChoice {
        let q = search.trim_start_matches('?');
        for pair in q.split('&') {
            match pair {
                "backend=gpu" => return BackendChoice::Gpu,
                "backend=cpu" => return BackendChoice::Cpu,
                _ => {}
            }
        }
        BackendChoice::Auto
    }
}

/// The CPU threads the page's address asks for (`?threads=N`, N ≥ 1; the page passes it on in
/// the engine worker's address); `None`: the default.
pub fn threads_from_query(search: &str) -> Option<usize> {
    search
        .trim_start_matches('?')
        .split('&')
        .find_map(|pair| pair.strip_prefix("threads="))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n >= 1)
}

/// The GPU tuning overrides the page's address gives (`?gpu_tuning=field:value,…`, for
/// measuring kernel variants on a browser's adapter, as `LOREKEEPER_GPU_TUNING` does natively;
/// the page passes it on in the engine worker's address, which applies it to its GPU context):
/// only the characters such a list holds; `None`: the adapter's own tuning.
pub fn gpu_tuning_from_query(search: &str) -> Option<String> {
    search
        .trim_start_matches('?')
        .split('&')
        .find_map(|pair| pair.strip_prefix("gpu_tuning="))
        .filter(|v| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | ','))
        })
        .map(str::to_string)
}

/// Page → worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Check this device, then download (or read from the cache), verify and load the bundle.
    Load {
        /// The bundle.
        bundle: CatalogEntry,
        /// Where the model runs (the page's `?backend=` setting; absent: auto).
        #[serde(default)]
        backend: BackendChoice,
    },
    /// Answer a question.
    Ask {
        /// The question as typed.
        question: String,
        /// Settings for it.
        settings: Settings,
    },
    /// Stop the generation under way (the answer so far is checked as usual).
    Stop,
    /// Test hook: destroy the GPU device, as a driver reset would (exercises recovery). Only
    /// in builds with the `test-hooks` feature (the browser test's); a release build refuses it.
    #[cfg(feature = "test-hooks")]
    LoseDevice,
    /// Test hook: panic inside the worker, as a bug would (exercises crash recovery). Only in
    /// builds with the `test-hooks` feature.
    #[cfg(feature = "test-hooks")]
    Crash,
    /// Time retrieval alone on the loaded bundle (`scripts/bench-search-wasm.mjs` sends it):
    /// each query is embedded on the GPU and on the wasm CPU backend, then searched `repeat`
    /// times (top `k`, every source fused).
    Bench {
        /// The queries.
        queries: Vec<String>,
        /// Hits per search.
        k: usize,
        /// Searches per query.
        repeat: usize,
    },
    /// Time the loaded model alone (`scripts/bench-page.mjs` sends it): prefill of
    /// `prompt_tokens` tokens of the benchmark text, then `gen_tokens` greedy decode steps,
    /// `runs` times (medians), as `lorekeeper bench` does natively.
    BenchDecode {
        /// Prompt length in tokens.
        prompt_tokens: usize,
        /// Generated tokens.
        gen_tokens: usize,
        /// Timed runs.
        runs: usize,
        /// Also profile `gen_tokens` decode steps (`lorekeeper bench --profile`'s table:
        /// dispatches, submissions, device time per kernel where the adapter has timestamps).
        #[serde(default)]
        profile: bool,
    },
}

/// A decode profile as the page reports it (see [`lorekeeper_engine::backend::Profile`]), per
/// generated token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecodeProfile {
    /// Dispatches per token.
    pub dispatches: f64,
    /// Submissions per token.
    pub submissions: f64,
    /// Whether the kernels' milliseconds are device time (timestamps around each dispatch,
    /// timed alone).
    pub timed: bool,
    /// Per kernel, most device time first: (label, dispatches per token, device ms per
    /// token, weight bytes per token).
    pub kernels: Vec<(String, f64, f64, f64)>,
}

impl DecodeProfile {
    /// `p` over `tokens` decode steps.
    pub fn per_token(p: &lorekeeper_engine::backend::Profile, tokens: usize) -> DecodeProfile {
        let t = tokens.max(1) as f64;
        DecodeProfile {
            dispatches: p.dispatches as f64 / t,
            submissions: p.submissions as f64 / t,
            timed: p.timed,
            kernels: p
                .kernels
                .iter()
                .map(|k| {
                    let per = |v: u64| v as f64 / t;
                    (
                        k.label.to_string(),
                        per(k.count),
                        per(k.ns) / 1e6,
                        per(k.weight_bytes),
                    )
                })
                .collect(),
        }
    }
}

/// Why something failed, so the page can say what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailKind {
    /// The browser has no WebGPU.
    NoWebGpu,
    /// The GPU lacks a limit the bundle needs.
    Limits,
    /// The bundle needs more memory than a browser page can hold (refused before download).
    Memory,
    /// A download failed.
    Network,
    /// A shard failed its length or sha256 check.
    Corrupt,
    /// The bundle does not load (manifest, config, tokenizer, index).
    Load,
    /// The question was refused (empty, too long).
    Question,
    /// A question or load is already under way.
    Busy,
    /// The GPU device was lost; the page re-initialises the worker.
    DeviceLost,
    /// The engine stopped (a panic or an uncaught error in the worker); the page starts a fresh
    /// worker, a few times at most.
    Crashed,
    /// Anything else.
    Internal,
}

/// Worker → page.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// The worker's message handler is installed (messages sent earlier would be lost).
    Alive,
    /// The capability check passed; what the download will take.
    Checked {
        /// The adapter, e.g. `google swiftshader [BrowserWebGpu, Cpu]`.
        adapter: String,
        /// Largest storage binding the bundle needs, bytes.
        binding_needed: u64,
        /// The adapter's limit.
        binding_limit: u64,
        /// All shards, bytes.
        bundle_bytes: u64,
        /// Bytes already in this browser's cache.
        cached_bytes: u64,
        /// Free storage the browser reports, bytes (`None`: no estimate).
        storage_free: Option<u64>,
        /// Downloads will be kept for the next visit.
        will_cache: bool,
        /// Why they will not be, when they will not.
        note: Option<String>,
    },
    /// Download progress (bytes verified so far, cached bytes included).
    Progress {
        /// Bytes done.
        done: u64,
        /// Bytes in all.
        total: u64,
        /// Bytes that came from the cache.
        from_cache: u64,
        /// Shards done.
        files_done: usize,
        /// Shards in all.
        files: usize,
    },
    /// The bundle is loaded and ready for questions.
    Loaded {
        /// The adapter.
        adapter: String,
        /// Model in words (architecture, parameters, quantization).
        model: String,
        /// Story passages in the index.
        passages: usize,
        /// Query embedder kind (`None`: BM25 + graph only).
        embedder: Option<String>,
        /// Seconds from the load request to ready.
        seconds: f64,
        /// Every shard came from the cache (no network for the bundle).
        all_cached: bool,
        /// Storage note (quota exceeded, cache unavailable).
        note: Option<String>,
    },
    /// Raw model output as it is generated.
    Token {
        /// The new text.
        text: String,
    },
    /// The finished answer.
    Answer {
        /// Everything the engine knows about it.
        answer: Box<Answer>,
    },
    /// Retrieval timings for a `bench` request, in milliseconds.
    Bench {
        /// The adapter the GPU embeddings ran on.
        adapter: String,
        /// Story passages in the index.
        passages: usize,
        /// Query embedding on the GPU, one per query (empty without an embedder).
        embed_gpu_ms: Vec<f64>,
        /// Query embedding on the wasm CPU backend (single-threaded), one per query.
        embed_cpu_ms: Vec<f64>,
        /// Fused search (dense HNSW + BM25 + graph + fusion + neighbors), `repeat` per query.
        search_ms: Vec<f64>,
        /// Hits of the last search of each query (ids), so a run can be checked.
        top_ids: Vec<Vec<u32>>,
    },
    /// Decoder timings for a `bench_decode` request.
    BenchDecode {
        /// Where it ran (backend, SIMD kind, threads).
        backend: String,
        /// Prompt tokens.
        prompt_tokens: usize,
        /// Generated tokens.
        gen_tokens: usize,
        /// Medians over the runs.
        result: lorekeeper_engine::generate::DecodeBench,
        /// The profile, when asked for and the backend keeps one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<DecodeProfile>,
    },
    /// Something failed.
    Failed {
        /// What kind of failure.
        kind: FailKind,
        /// In plain language, naming what is wrong.
        message: String,
    },
}

/// Encodes a message.
pub fn encode<T: Serialize>(m: &T) -> String {
    serde_json::to_string(m).unwrap_or_else(|e| {
        format!("{{\"type\":\"failed\",\"kind\":\"internal\",\"message\":\"cannot encode a message: {e}\"}}")
    })
}

/// Decodes a message, naming what is wrong.
pub fn decode<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| format!("bad message ({e}): {}", cut(text, 120)))
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = ToWorker::Ask {
            question: "Who stole the tarts?".into(),
            settings: Settings::default(),
        };
        let s = encode(&m);
        assert!(s.starts_with("{\"type\":\"ask\""), "{s}");
        assert_eq!(decode::<ToWorker>(&s), Ok(m));
        let f = FromWorker::Failed {
            kind: FailKind::Corrupt,
            message: "model-00000-abc.bin: sha256 is …".into(),
        };
        let back: FromWorker = decode(&encode(&f)).expect("decodes");
        assert!(matches!(
            back,
            FromWorker::Failed {
                kind: FailKind::Corrupt,
                ..
            }
        ));
        assert!(decode::<ToWorker>("{\"type\":\"dance\"}").is_err());
    }

    /// The test hooks exist only with the `test-hooks` feature: a release build refuses them.
    #[test]
    #[cfg(not(feature = "test-hooks"))]
    fn test_hooks_are_not_in_release_builds() {
        for hook in ["lose_device", "crash"] {
            let e = decode::<ToWorker>(&format!("{{\"type\":\"{hook}\"}}"));
            assert!(
                e.is_err(),
                "'{hook}' is accepted without the test-hooks feature"
            );
        }
    }

    #[test]
    fn threads_from_the_address() {
        assert_eq!(threads_from_query(""), None);
        assert_eq!(threads_from_query("?threads=1"), Some(1));
        assert_eq!(threads_from_query("?backend=cpu&threads=4"), Some(4));
        assert_eq!(threads_from_query("?threads=0"), None);
        assert_eq!(threads_from_query("?threads=two"), None);
    }

    #[test]
    fn gpu_tuning_from_the_address() {
        assert_eq!(gpu_tuning_from_query("?backend=gpu"), None);
        assert_eq!(
            gpu_tuning_from_query("?backend=gpu&gpu_tuning=gemv_rpl:2,gemv_wg:32"),
            Some("gemv_rpl:2,gemv_wg:32".into())
        );
        // Anything a tuning list does not hold (an escaped character, markup) is ignored.
        assert_eq!(gpu_tuning_from_query("?gpu_tuning=gemv_rpl%3A2"), None);
        assert_eq!(gpu_tuning_from_query("?gpu_tuning=<b>"), None);
        assert_eq!(gpu_tuning_from_query("?gpu_tuning="), None);
    }

    #[test]
    fn backend_choice_from_the_address_and_in_load() {
        assert_eq!(BackendChoice::from_query(""), BackendChoice::Auto);
        assert_eq!(
            BackendChoice::from_query("?backend=cpu"),
            BackendChoice::Cpu
        );
        assert_eq!(
            BackendChoice::from_query("?x=1&backend=gpu"),
            BackendChoice::Gpu
        );
        assert_eq!(
            BackendChoice::from_query("?backend=tpu"),
            BackendChoice::Auto
        );
        // A load message without the field (an older page) means auto.
        let m: ToWorker = decode(
            r#"{"type":"load","bundle":{"id":"a","title":"A","path":"bundles/a/","description":""}}"#,
        )
        .expect("decodes");
        assert!(matches!(
            m,
            ToWorker::Load {
                backend: BackendChoice::Auto,
                ..
            }
        ));
        let m = ToWorker::BenchDecode {
            prompt_tokens: 512,
            gen_tokens: 128,
            runs: 3,
            profile: true,
        };
        assert_eq!(decode::<ToWorker>(&encode(&m)), Ok(m));
        // Scripts that predate the profile still send a valid request.
        let old = r#"{"type":"bench_decode","prompt_tokens":64,"gen_tokens":16,"runs":1}"#;
        assert!(matches!(
            decode::<ToWorker>(old),
            Ok(ToWorker::BenchDecode { profile: false, .. })
        ));
    }

    #[test]
    fn settings_apply_and_check() {
        let mut cfg = AskConfig::default();
        let s = Settings {
            mode: Mode::Refiner,
            temperature: 0.0,
            max_tokens: 64,
            seed: 7,
            grammar: false,
        };
        s.apply(&mut cfg);
        assert_eq!(
            (
                cfg.mode,
                cfg.sampling.temperature,
                cfg.sampling.seed,
                cfg.max_tokens,
                cfg.grammar
            ),
            (Mode::Refiner, 0.0, 7, 64, false)
        );
        assert!(s.check().is_ok());
        let bad = Settings {
            temperature: f32::NAN,
            ..Settings::default()
        };
        assert!(bad.check().is_err());
        let bad = Settings {
            max_tokens: 0,
            ..Settings::default()
        };
        assert!(bad.check().unwrap_err().contains("max tokens 0"));
    }

    #[test]
    fn catalog_is_checked() {
        let c =
            parse_catalog(r#"{"bundles":[{"id":"alice","title":"Alice","path":"bundles/alice"}]}"#)
                .expect("parses");
        assert_eq!(c.bundles[0].base(), "bundles/alice/");
        assert!(parse_catalog(
            r#"{"bundles":[{"id":"x","title":"X","path":"https://evil.example/b/"}]}"#
        )
        .unwrap_err()
        .contains("same-origin"));
        // Each of these leaves the site in a browser's URL parser (or could, after the
        // browser strips tabs and newlines); each is refused, naming why.
        for (path, why) in [
            ("/\\evil.example/b/", "backslash"),
            ("\\\\evil.example/b/", "backslash"),
            ("https:evil.example/b/", "scheme"),
            ("HTTPS:evil.example", "scheme"),
            ("data:text/html,hi", "scheme"),
            ("javascript:alert(1)", "scheme"),
            ("//evil.example/b/", "another host"),
            ("/\t/evil.example/", "control"),
            ("bundles/a b/", "whitespace"),
        ] {
            let json = serde_json::json!({"bundles": [{"id": "x", "title": "X", "path": path}]});
            let e = parse_catalog(&json.to_string()).unwrap_err();
            assert!(
                e.contains(why) && e.contains("same-origin"),
                "{path:?}: {e}"
            );
        }
        for ok in [
            "bundles/alice/",
            "/bundles/alice",
            "./b/",
            "../shared/b/",
            "b/x:y/",
        ] {
            assert_eq!(check_bundle_path(ok), Ok(()), "{ok}");
        }
        let pinned = r#"{"bundles":[{"id":"x","title":"X","path":"b/","manifest_sha256":"abc"}]}"#;
        assert!(parse_catalog(pinned).unwrap_err().contains("64 hex digits"));
        assert!(parse_catalog(r#"{"bundles":[{"id":"","title":"X","path":"b"}]}"#).is_err());
        assert!(parse_catalog("not json")
            .unwrap_err()
            .contains("index.json"));
    }
}
