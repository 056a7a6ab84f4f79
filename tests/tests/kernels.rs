//! Native runner: every suite check on the CPU reference and on the native wgpu adapter
//! (lavapipe in CI). Each GPU check prints the adapter it ran on.

#![cfg(not(target_arch = "wasm32"))]

use std::sync::OnceLock;

use lorekeeper_engine::cpu::pool as cpu_pool;
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::{Backend, CpuBackend, GpuContext, Requirements};
use lorekeeper_tests::suite;

fn gpu() -> &'static GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| match GpuContext::new_blocking(Requirements::default()) {
        Ok(c) => {
            println!("adapter: {}", c.adapter_description());
            c
        }
        Err(e) => panic!("no GPU adapter for the kernel tests: {e}"),
    })
}

/// A GPU context of the test's own: for tests that change its tuning or count what it builds
/// (the shared one runs other tests' kernels concurrently).
fn own_gpu() -> GpuContext {
    match GpuContext::new_blocking(Requirements::default()) {
        Ok(c) => c,
        Err(e) => panic!("no GPU adapter: {e}"),
    }
}

const SEEDS: [u64; 4] = [1, 2, 3, 4];

fn report(who: &str, seed: u64, r: suite::Check) {
    match r {
        Ok(line) => println!("[{who}] seed {seed}: {line}"),
        Err(msg) => panic!("[{who}] seed {seed}: {msg}"),
    }
}

macro_rules! on_both {
    ($($name:ident),*) => {
        mod cpu {
            use super::*;
            $( #[test] fn $name() {
                for seed in SEEDS { report(&CpuBackend.describe(), seed, pollster::block_on(suite::$name(&CpuBackend, seed))); }
            } )*
        }
        mod wgpu {
            use super::*;
            $( #[test] fn $name() {
                for seed in SEEDS { report(&gpu().describe(), seed, pollster::block_on(suite::$name(gpu(), seed))); }
            } )*
        }
    };
}

on_both!(
    q4_gemv,
    q4_gemm,
    q4_fused,
    f32_gemv,
    f32_gemm,
    rms_norm,
    rope,
    rms_norm_rope,
    attention,
    attention_kv,
    attention_prefill,
    rope_append,
    rms_norm_rope_append,
    silu_mul,
    add,
    softmax,
    embed_q4,
    select,
    select_filtered,
    q4_blocks,
    layer_norm,
    bias_gelu,
    sigmoid_mul,
    take_half,
    conv1d,
    delta_rule
);

#[test]
fn errors_are_named_not_panics() {
    for r in [
        pollster::block_on(suite::rejects_bad_shapes(&CpuBackend)),
        pollster::block_on(suite::rejects_bad_shapes(gpu())),
    ] {
        match r {
            Ok(line) => println!("{line}"),
            Err(msg) => panic!("{msg}"),
        }
    }
}

#[test]
fn pipelines_are_cached() {
    let ctx = gpu();
    pollster::block_on(suite::silu_mul(ctx, 11)).unwrap_or_else(|m| panic!("{m}"));
    let before = ctx.pipeline_count();
    pollster::block_on(suite::silu_mul(ctx, 12)).unwrap_or_else(|m| panic!("{m}"));
    assert_eq!(
        ctx.pipeline_count(),
        before,
        "a second run of the same kernel compiled a new pipeline"
    );
}

/// A decode step's token-loop ops on the GPU, the embedding gather, decode attention (its
/// split partials in scratch where the tuning splits) and sampling under a mask with the
/// penalty, build their bind groups at the first step only: no buffer is created per
/// token (the ids and the bitsets go into pooled scratch buffers), so later steps find every
/// bind group in the cache.
#[test]
fn token_steps_build_no_bind_groups() {
    // A context of its own: the shared one runs other tests' kernels concurrently.
    let ctx = own_gpu();
    let mut rng = Pcg32::new(5);
    let (vocab, cols) = (301, 96);
    let table = ctx
        .upload_q4("table", &suite::random_q4(&mut rng, vocab, cols))
        .expect("table");
    let x = ctx.alloc("x", cols).expect("x");
    let logits = ctx
        .upload("logits", &rng.normal_vec(vocab, 2.0))
        .expect("logits");
    let shape = lorekeeper_engine::AttnShape {
        tokens: 1,
        heads: 4,
        kv_heads: 2,
        head_dim: 32,
        pos0: 40,
        ctx: 64,
        scale: 32f32.powf(-0.5),
        causal: true,
    };
    let q = ctx.upload("q", &rng.normal_vec(4 * 32, 1.0)).expect("q");
    let kv = rng.normal_vec(64 * 2 * 32, 1.0);
    let (kc, vc) = (
        ctx.upload("k", &kv).expect("k"),
        ctx.upload("v", &kv).expect("v"),
    );
    let att = ctx.alloc("attention out", 4 * 32).expect("out");
    let step = |t: u32| {
        ctx.embed_q4(&[t], &table, &x).expect("embed");
        ctx.attention(&q, &kc, &vc, &att, shape).expect("attention");
        let mask: Vec<u32> = (0..vocab.div_ceil(32) as u32)
            .map(|w| 0x5555_5555u32.rotate_left(w + t))
            .collect();
        let seen = vec![1u32 << (t % 32); vocab.div_ceil(32)];
        let filter = lorekeeper_engine::LogitFilter {
            allowed: Some(&mask),
            penalized: Some(&seen),
            penalty: 1.1,
        };
        pollster::block_on(ctx.select_filtered(&logits, vocab, 8, Some(1.0), &filter))
            .expect("select");
    };
    step(3);
    let built = ctx.bind_group_count();
    for t in [7, 11, 200, 4, 9] {
        step(t);
    }
    assert_eq!(
        ctx.bind_group_count(),
        built,
        "a later token step built bind groups of its own"
    );
}

#[test]
fn profile_counts_and_times_each_dispatch() {
    // A context of its own: the shared one runs other tests' kernels concurrently.
    let ctx = own_gpu();
    assert!(
        Backend::take_profile(&ctx).is_none(),
        "a profile before any was started"
    );
    Backend::start_profile(&ctx);
    for seed in [1, 2] {
        pollster::block_on(suite::silu_mul(&ctx, seed)).unwrap_or_else(|m| panic!("{m}"));
    }
    let p = Backend::take_profile(&ctx).expect("the GPU keeps a profile");
    println!("{p:?}");
    let silu = p.kernels.iter().find(|k| k.label == "silu_mul");
    assert_eq!(silu.map(|k| k.count), Some(2), "{p:?}");
    assert_eq!(p.dispatches, 2, "{p:?}");
    assert!(p.submissions >= 2, "each read submits: {p:?}");
    if p.timed {
        assert!(
            silu.is_some_and(|k| k.ns > 0),
            "timed, yet no device time: {p:?}"
        );
    }
    assert!(
        Backend::take_profile(&ctx).is_none(),
        "taking a profile stops it"
    );
}

#[test]
fn fused_kernels_pass_the_adapters_own_check() {
    // The check a context runs before decoding on a GPU (the fused ops against the plain ones)
    // must pass here, with the rasteriser's tuning and with a GPU's (the SwiGLU GEMV runs only
    // with the word-per-lane kernel), and leave the fusions on.
    let mut ctx = own_gpu();
    for (groups, tpr) in [(true, 1), (false, 32), (false, 8)] {
        ctx.tuning.gemv_groups = groups;
        ctx.tuning.gemv_tpr = tpr;
        ctx.tuning.gemv_wg = if groups { 16 } else { 64 };
        let why = pollster::block_on(ctx.verify_fused()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(why, None, "groups={groups} TPR={tpr}");
        assert!(
            ctx.tuning.fuse,
            "groups={groups} TPR={tpr}: fusions left off"
        );
        // TPR 8 fits lavapipe's subgroups: the check compared the shuffled sums too.
        assert!(
            ctx.tuning.gemv_subgroups,
            "groups={groups} TPR={tpr}: subgroup sums left off"
        );
    }
}

#[test]
fn decode_attention_every_tile_size() {
    // GPUs take 128 keys per tile and ranges of one tile; every tile size the kernel allows
    // must be exact, and so must ranges of several tiles (few target workgroups), where the
    // running max and the accumulators are rescaled from tile to tile. The KV appends go
    // both ways too: a transfer command (rasterisers) and a dispatch in the pass (GPUs).
    let mut ctx = own_gpu();
    ctx.tuning.decode_lanes = 0;
    for (wg, groups) in [(8, 1024), (32, 2), (64, 1), (128, 1024), (256, 3)] {
        ctx.tuning.decode_wg = wg;
        ctx.tuning.attn_groups = groups;
        ctx.tuning.kv_dispatch = wg >= 64;
        let kv = ctx.tuning.kv_dispatch;
        let who = format!(
            "{} decode WG={wg} target groups={groups} kv_dispatch={kv}",
            ctx.describe()
        );
        attention_suites(&ctx, &who);
    }
}

#[test]
fn row_kernels_every_workgroup_size() {
    // The row-wise reductions (norms, softmax, the norms with RoPE and the KV append, and
    // decode attention's merge of its key ranges) take one workgroup of `reduce_wg` lanes a
    // row: 4 on CPU rasterisers, 128 on GPUs. Every width must be exact, on rows that are not
    // multiples of it.
    let mut ctx = own_gpu();
    for wg in [4, 16, 64, 128, 256] {
        ctx.tuning.reduce_wg = wg;
        let who = format!("{} reduce WG={wg}", ctx.describe());
        for seed in SEEDS {
            report(&who, seed, pollster::block_on(suite::rms_norm(&ctx, seed)));
            report(&who, seed, pollster::block_on(suite::softmax(&ctx, seed)));
            report(
                &who,
                seed,
                pollster::block_on(suite::layer_norm(&ctx, seed)),
            );
            report(
                &who,
                seed,
                pollster::block_on(suite::rms_norm_rope(&ctx, seed)),
            );
            report(
                &who,
                seed,
                pollster::block_on(suite::rms_norm_rope_append(&ctx, seed)),
            );
        }
        attention_suites(&ctx, &who);
    }
}

/// The kernel suite's attention checks (over given caches, and over KV caches) on every seed.
fn attention_suites(ctx: &GpuContext, who: &str) {
    for seed in SEEDS {
        report(who, seed, pollster::block_on(suite::attention(ctx, seed)));
        report(
            who,
            seed,
            pollster::block_on(suite::attention_kv(ctx, seed)),
        );
    }
}

#[test]
fn decode_attention_lanes_every_range() {
    // CPU rasterisers take the lanes kernel (one lane per query head and key range, R ranges a
    // workgroup): ranges of one key up to ranges past the context, a range count that is not
    // a multiple of R (the last workgroup's spare lanes write nothing), one lane a workgroup
    // up to 32, over f32 and f16 caches with head_dim a multiple of 8 and of 4 only.
    let mut ctx = own_gpu();
    for (keys, width, groups) in [
        (1, 8, 1024),
        (7, 3, 1024),
        (256, 8, 1024),
        (16, 32, 5),
        (64, 1, 2),
    ] {
        ctx.tuning.decode_lanes = keys;
        ctx.tuning.lanes_width = width;
        ctx.tuning.attn_groups = groups;
        let who = format!(
            "{} lanes: {keys} keys a range, {width} lanes, target groups {groups}",
            ctx.describe()
        );
        attention_suites(&ctx, &who);
    }
}

#[test]
fn prefill_attention_every_row_count() {
    // CPU rasterisers take the rows kernel for prefill (a lane per query token and group of
    // query heads, TB tokens a workgroup); GPUs the tiled kernel (prefill_rows 0: TQ tokens of
    // a KV head a workgroup, tiles of TK keys), or the one-pass kernel with the tiles off.
    // Every count must be exact: one token a workgroup, counts that do not divide the tokens,
    // and more than a prefill chunk holds (the workgroup's lanes capped at 256).
    let mut ctx = own_gpu();
    for (rows, tiles) in [
        (0, false),
        (0, true),
        (1, true),
        (3, true),
        (8, true),
        (64, true),
    ] {
        (ctx.tuning.prefill_rows, ctx.tuning.prefill_tiles) = (rows, tiles);
        let who = format!("{} prefill rows={rows} tiles={tiles}", ctx.describe());
        for seed in SEEDS {
            report(
                &who,
                seed,
                pollster::block_on(suite::attention_prefill(&ctx, seed)),
            );
        }
        attention_suites(&ctx, &who);
    }
}

#[test]
fn prefill_gemm_every_lane_shape() {
    // CPU rasterisers take the lanes GEMM for prefill (a lane: `gemv_rpl` rows WG apart and
    // `gemm_tokens` tokens); GPUs the tiled GEMM (gemm_tokens 0). Every shape must be exact on
    // every layout, with rows and tokens that do not fill the last workgroup or lane.
    let mut ctx = own_gpu();
    for (rpl, tokens, wg) in [(1, 1, 8), (8, 4, 8), (2, 3, 16), (4, 8, 4), (8, 0, 8)] {
        (
            ctx.tuning.gemv_rpl,
            ctx.tuning.gemm_tokens,
            ctx.tuning.gemv_wg,
        ) = (rpl, tokens, wg);
        let who = format!(
            "{} GEMM rows a lane={rpl} tokens a lane={tokens} WG={wg}",
            ctx.describe()
        );
        for seed in SEEDS {
            report(&who, seed, pollster::block_on(suite::q4_gemm(&ctx, seed)));
            report(&who, seed, pollster::block_on(suite::q4_fused(&ctx, seed)));
        }
    }
}

#[test]
fn gemv_every_threads_per_row() {
    // The default tuning picks one TPR and one kernel per adapter type; the cooperative
    // reduction (TPR > 1, used on GPUs) and every kernel (a word per lane on GPUs, with its
    // loads four steps at a time or not, a 32-weight group on CPU rasterisers) must be exact
    // too, so run every variant here. The word kernel's fused forms (the input's norm in the
    // prologue, several matrices per dispatch) run with each of them, and once more with
    // fewer matrices per dispatch and the norm's own pass.
    let mut ctx = own_gpu();
    // The group kernel with one thread per row also takes 2, 4 and 8 rows per lane (rasterisers).
    let variants = [
        (false, 1, 1),
        (false, 4, 1),
        (true, 1, 1),
        (true, 1, 2),
        (true, 1, 4),
        (true, 1, 8),
    ];
    let mut shuffled = 0;
    for (groups, unroll, rpl) in variants {
        let tprs: &[u32] = if rpl > 1 {
            &[1]
        } else {
            &[1, 2, 8, 16, 32, 64]
        };
        // Each TPR through workgroup memory, and again by subgroup shuffles where the adapter
        // has subgroups that hold a row's lanes (lavapipe: 8 lanes, so TPR 2 and 8).
        for (&tpr, subgroups) in tprs.iter().flat_map(|t| [(t, false), (t, true)]) {
            ctx.tuning.gemv_tpr = tpr;
            ctx.tuning.gemv_groups = groups;
            ctx.tuning.gemv_unroll = unroll;
            ctx.tuning.gemv_rpl = rpl;
            ctx.tuning.gemv_subgroups = subgroups;
            if subgroups && !ctx.subgroup_rows() {
                continue;
            }
            shuffled += usize::from(subgroups);
            // Up to 64 threads a row need a workgroup as wide; rows per lane run 16 lanes wide
            // here (the rasterisers' own 8 lanes run in every test on the default tuning).
            ctx.tuning.gemv_wg = if rpl > 1 { 16 } else { 64 };
            for seed in SEEDS {
                let who = format!(
                    "{} TPR={tpr} groups={groups} unroll={unroll} rows per lane={rpl} WG={} \
                     subgroups={subgroups}",
                    ctx.describe(),
                    ctx.tuning.gemv_wg
                );
                report(&who, seed, pollster::block_on(suite::q4_gemv(&ctx, seed)));
                report(&who, seed, pollster::block_on(suite::q4_fused(&ctx, seed)));
                if unroll == 4 && !subgroups {
                    // The f32 GEMV (Qwen3.5's small projections) shares the threads per row.
                    report(&who, seed, pollster::block_on(suite::f32_gemv(&ctx, seed)));
                }
            }
        }
    }
    // An adapter with subgroups (lavapipe's, in CI) ran the shuffled sums.
    if let Some(min) = ctx.subgroup_min() {
        assert!(
            shuffled > 0,
            "{}: subgroups of {min} or more, yet no GEMV variant summed by shuffles",
            ctx.describe()
        );
    }
    ctx.tuning.gemv_subgroups = true;
    (
        ctx.tuning.gemv_groups,
        ctx.tuning.gemv_tpr,
        ctx.tuning.gemv_wg,
    ) = (false, 32, 64);
    for (parts, norm) in [(1, true), (2, false)] {
        ctx.tuning.gemv_parts = parts;
        ctx.tuning.norm_gemv = norm;
        for seed in SEEDS {
            let who = format!("{} TPR=32 parts={parts} norm={norm}", ctx.describe());
            report(&who, seed, pollster::block_on(suite::q4_fused(&ctx, seed)));
        }
    }
}

#[test]
fn cpu_rows_match_the_scalar_rows() {
    for seed in SEEDS {
        report(&CpuBackend.describe(), seed, suite::cpu_rows(seed));
    }
}

#[test]
fn cpu_matmuls_on_one_and_three_threads() {
    // The CPU's 4-bit matmuls split rows over threads; one thread and an odd count that does
    // not divide the shapes must give the same checked results (rayon's GEMM pool has exactly
    // that many; the decode pool is capped at it, so it runs min(3, its size) threads).
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap_or_else(|e| panic!("thread pool: {e}"));
        for seed in [5u64, 6, 7, 8, 9, 10] {
            // Decode GEMVs split over the engine's own pool, the prefill GEMM over rayon's.
            for (name, r) in pool.install(|| {
                cpu_pool::with_max_threads(threads, || {
                    [
                        (
                            "q4_gemv",
                            pollster::block_on(suite::q4_gemv(&CpuBackend, seed)),
                        ),
                        (
                            "q4_gemm",
                            pollster::block_on(suite::q4_gemm(&CpuBackend, seed)),
                        ),
                        (
                            "q4_blocks",
                            pollster::block_on(suite::q4_blocks(&CpuBackend, seed)),
                        ),
                    ]
                })
            }) {
                report(&format!("cpu {threads} threads {name}"), seed, r);
            }
        }
    }
}
