//! The kernel conformance suite. Every check is generic over [`Backend`], so the same body
//! runs on the CPU reference, on native wgpu (lavapipe in CI) and in headless Chromium.
//! On success a check returns a one-line report (shapes, worst error, bound).

use lorekeeper_engine::backend::rope_table;
use lorekeeper_engine::backend::DeltaShape;
use lorekeeper_engine::rng::Pcg32;
use lorekeeper_engine::{
    AttnShape, Backend, KvFormat, MatmulInput, MatmulKernel, Q4Matrix, RopeShape, Tolerance,
};

use lorekeeper_engine::quant::BlockLayout;

use crate::oracle;

/// The bound of each op, stated once.
pub mod bounds {
    use super::Tolerance;
    /// Matmuls (4-bit and f32): f32 accumulation over at most 768 products of N(0,1) x N(0,0.05).
    pub const Q4_MATMUL: Tolerance = Tolerance::new(1e-4, 1e-4);
    /// RMSNorm: one f32 reduction and a reciprocal square root.
    pub const RMS_NORM: Tolerance = Tolerance::new(1e-5, 1e-5);
    /// RoPE: two f32 products and a sum per element.
    pub const ROPE: Tolerance = Tolerance::new(1e-6, 1e-5);
    /// Attention: f32 dots, online-softmax rescaling over up to ~90 keys.
    pub const ATTENTION: Tolerance = Tolerance::new(2e-5, 1e-4);
    /// Element-wise ops with `exp`.
    pub const ELEMENTWISE: Tolerance = Tolerance::new(1e-6, 1e-5);
    /// Softmax over up to 3000 columns.
    pub const SOFTMAX: Tolerance = Tolerance::new(1e-7, 1e-4);
    /// Addition: one f32 rounding.
    pub const ADD: Tolerance = Tolerance::new(0.0, 1.2e-7);
    /// Dequantized gather: one f32 multiply-add per element.
    pub const EMBED: Tolerance = Tolerance::new(1e-6, 1e-6);
    /// Conv1d + SiLU: K f32 products per element and an `exp`.
    pub const CONV1D: Tolerance = Tolerance::new(1e-6, 1e-5);
    /// Gated delta rule: dk-long f32 dots per step, the state carried over up to 40 steps
    /// (outputs are O(0.1): q is L2-normalized and scaled by dk^-0.5; measured <= 4e-8).
    pub const DELTA_RULE: Tolerance = Tolerance::new(1e-6, 1e-4);
    /// The softmax normaliser returned by `select`.
    pub const SUM_EXP: Tolerance = Tolerance::new(0.0, 1e-5);
}

/// Result of one check: a report line, or what failed.
pub type Check = Result<String, String>;

fn compare(op: &str, shape: String, tol: Tolerance, expected: &[f64], actual: &[f32]) -> Check {
    match tol.check(expected, actual) {
        Ok(max) => Ok(format!("{op} {shape}: max abs err {max:.2e} within {tol}")),
        Err(m) => Err(format!("{op} {shape}: {m} (bound {tol})")),
    }
}

fn e<T: std::fmt::Display>(op: &str) -> impl Fn(T) -> String + '_ {
    move |err| format!("{op}: unexpected error: {err}")
}

/// Every block layout the matmul and embedding kernels read.
const LAYOUTS: [BlockLayout; 6] = [
    BlockLayout::Lq4,
    BlockLayout::Lq4h,
    BlockLayout::Q8,
    BlockLayout::Q6,
    BlockLayout::Lq4k,
    BlockLayout::Q5,
];

/// A random LQ4 matrix `[n, k]` and its source weights.
pub fn random_q4(rng: &mut Pcg32, n: usize, k: usize) -> Q4Matrix {
    random_q4_as(rng, BlockLayout::Lq4, n, k)
}

/// A random block-quantized matrix `[n, k]` of any layout: LQ4 quantized from Gaussian
/// weights, `lq4h` from random GGUF Q4_1 blocks (f16 scale `d > 0`, min `m < 0`, as llama.cpp
/// writes them, and random codes), `q8_0` from random GGUF Q8_0 blocks (all 256 codes),
/// `q6_k` from random codes and half scales (all 64 and 256 values) with an f16 `d > 0`,
/// `q5` from random GGUF Q5_1 blocks (f16 `d > 0`, min `m < 0`, random fifth bits and nibbles).
pub fn random_q4_as(rng: &mut Pcg32, scales: BlockLayout, n: usize, k: usize) -> Q4Matrix {
    let m = match scales {
        BlockLayout::Lq4 => Q4Matrix::quantize("random", n, k, &rng.normal_vec(n * k, 0.05)),
        BlockLayout::Lq4h => {
            let mut raw = Vec::with_capacity(n * k / 32 * 20);
            for _ in 0..n * k / 32 {
                let v = rng.normal_vec(2, 1.0);
                let d = half::f16::from_f32(0.002 + 0.01 * v[0].abs());
                let m = half::f16::from_f32(-0.02 - 0.1 * v[1].abs());
                raw.extend_from_slice(&d.to_bits().to_le_bytes());
                raw.extend_from_slice(&m.to_bits().to_le_bytes());
                raw.extend((0..16).map(|_| (rng.next_u32() & 0xFF) as u8));
            }
            Q4Matrix::from_ggml_q4_1("random", n, k, &raw)
        }
        BlockLayout::Q8 => {
            let mut raw = Vec::with_capacity(n * k / 32 * 34);
            for _ in 0..n * k / 32 {
                let d = half::f16::from_f32(0.0002 + 0.001 * rng.normal_vec(1, 1.0)[0].abs());
                raw.extend_from_slice(&d.to_bits().to_le_bytes());
                raw.extend((0..32).map(|_| (rng.next_u32() & 0xFF) as u8));
            }
            Q4Matrix::from_ggml_q8_0("random", n, k, &raw)
        }
        BlockLayout::Q6 => {
            let layout = BlockLayout::Q6;
            let sm = layout.sm_offset(n, k);
            let words: Vec<u32> = (0..layout.words(n, k))
                .map(|i| {
                    let r = rng.next_u32();
                    if i < sm {
                        return r;
                    }
                    let d = half::f16::from_f32(0.00002 + 0.0001 * rng.normal_vec(1, 1.0)[0].abs());
                    (r & 0xFFFF) | (d.to_bits() as u32) << 16
                })
                .collect();
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            Q4Matrix::from_bytes("random", layout, n, k, &bytes)
        }
        BlockLayout::Q5 => {
            let mut raw = Vec::with_capacity(n * k / 32 * 24);
            for _ in 0..n * k / 32 {
                let v = rng.normal_vec(2, 1.0);
                let d = half::f16::from_f32(0.001 + 0.005 * v[0].abs());
                let m = half::f16::from_f32(-0.02 - 0.1 * v[1].abs());
                raw.extend_from_slice(&d.to_bits().to_le_bytes());
                raw.extend_from_slice(&m.to_bits().to_le_bytes());
                raw.extend((0..20).map(|_| (rng.next_u32() & 0xFF) as u8));
            }
            Q4Matrix::from_ggml_q5("random", n, k, &raw, true)
        }
        BlockLayout::Lq4k => {
            // Random codes; per row and super-block of 8 groups (fewer at the row's end) an
            // f16 `d`, `dmin` > 0, then random 6-bit `(sc, mn)` per group.
            let layout = BlockLayout::Lq4k;
            let groups = k / 32;
            let mut bytes: Vec<u8> = (0..n * k / 2).map(|_| rng.next_u32() as u8).collect();
            for _ in 0..n {
                for g0 in (0..groups).step_by(8) {
                    let v = rng.normal_vec(2, 1.0);
                    let d = half::f16::from_f32(0.0002 + 0.001 * v[0].abs());
                    let dmin = half::f16::from_f32(0.001 + 0.005 * v[1].abs());
                    bytes.extend_from_slice(&d.to_bits().to_le_bytes());
                    bytes.extend_from_slice(&dmin.to_bits().to_le_bytes());
                    for _ in g0..(g0 + 8).min(groups) {
                        let r = rng.next_u32();
                        bytes.extend_from_slice(&[(r & 63) as u8, ((r >> 8) & 63) as u8]);
                    }
                }
            }
            bytes.resize(bytes.len().div_ceil(4) * 4, 0);
            Q4Matrix::from_bytes("random", layout, n, k, &bytes)
        }
    };
    // Shapes here are valid by construction; a failure is a bug in the quantizer.
    m.unwrap_or_else(|err| panic!("quantize: {err}"))
}

/// The oracle of a 4-bit matmul of `m` rows on `b`: f32 activations, or the 8-bit blocks the
/// backend rounds them to ([`Backend::q4_activation_rounding`]).
fn q4_oracle<B: Backend>(b: &B, x: &[f32], w: &Q4Matrix, m: usize) -> Vec<f64> {
    let w = &*as_run(b, w);
    match b.q4_activation_rounding(w.layout, m) {
        Some(span) => oracle::q4_matmul_q8(x, w, m, span),
        None => oracle::q4_matmul(x, w, m),
    }
}

/// `w` as `b` runs it: its own layout, or the one its upload converts to
/// ([`Backend::runs_layout`]: `q6_k` as `q8_0` on the GPU).
fn as_run<'a, B: Backend>(b: &B, w: &'a Q4Matrix) -> std::borrow::Cow<'a, Q4Matrix> {
    if b.runs_layout(w.layout) == w.layout {
        return std::borrow::Cow::Borrowed(w);
    }
    // Random matrices convert by construction; a failure is a bug in the conversion.
    w.to_portable("w")
        .unwrap_or_else(|err| panic!("convert: {err}"))
}

async fn q4_matmul<B: Backend>(b: &B, seed: u64, kernel: MatmulKernel) -> Check {
    let op = match kernel {
        MatmulKernel::Gemv => "q4_gemv",
        MatmulKernel::Gemm => "q4_gemm",
    };
    let mut rng = Pcg32::new(seed);
    let (m, n, k) = match kernel {
        MatmulKernel::Gemv => (rng.range(1, 3), rng.range(1, 300), 32 * rng.range(1, 24)),
        MatmulKernel::Gemm => (rng.range(1, 70), rng.range(1, 100), 32 * rng.range(1, 12)),
    };
    let x = rng.normal_vec(m * k, 1.0);
    let xd = b.upload("x", &x).map_err(e(op))?;
    // Every layout: LQ4, lq4h (GGUF Q4_0 / Q4_1 blocks as imported), q8_0 (GGUF Q8_0).
    let mut said = Vec::new();
    for scales in LAYOUTS {
        let w = random_q4_as(&mut rng, scales, n, k);
        let wd = b.upload_q4("w", &w).map_err(e(op))?;
        let od = b.alloc("out", m * n).map_err(e(op))?;
        b.q4_matmul(&xd, &wd, &od, m, kernel).map_err(e(op))?;
        let got = b.read(&od, 0, m * n).await.map_err(e(op))?;
        said.push(compare(
            op,
            format!("{} m={m} n={n} k={k}", w.layout_name()),
            bounds::Q4_MATMUL,
            &q4_oracle(b, &x, &w, m),
            &got,
        )?);
    }
    Ok(said.join("; "))
}

/// The fused 4-bit matmuls: the residual add in the matmul (`q4_matmul_add`), SwiGLU of
/// two matrices (`q4_matmul_glu`) and several matrices in one pass (`q4_matmul_many`), every
/// layout, decode (even seeds) and prefill shapes (odd
/// seeds, which backends compose from the plain ops), against the oracle's matmul plus the
/// add, and silu(gate) * up.
pub async fn q4_fused<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "q4_fused";
    let mut rng = Pcg32::new(seed + 900);
    let (kernel, m) = if seed.is_multiple_of(2) {
        (MatmulKernel::Gemv, rng.range(1, 3))
    } else {
        (MatmulKernel::Gemm, rng.range(9, 40))
    };
    let (n, k) = (rng.range(1, 300), 32 * rng.range(1, 24));
    let x = rng.normal_vec(m * k, 1.0);
    let acc0 = rng.normal_vec(m * n, 1.0);
    let xd = b.upload("x", &x).map_err(e(op))?;
    // The layer's input norm applied to `x` first (`MatmulInput::RmsNormed`, which a backend
    // may apply in the matmul's prologue), with a `(1 + w)` weight on every other even seed.
    // The oracle reads the backend's own RMSNorm of `x` (the op is held to its oracle by
    // `rms_norm`), so activations rounded to 8 bits round the same values.
    let offset = (seed / 2 % 2) as f32;
    let nwd = b.upload("norm", &rng.normal_vec(k, 0.5)).map_err(e(op))?;
    let normed = b.alloc("normed", m * k).map_err(e(op))?;
    b.rms_norm(&xd, &nwd, &normed, m, k, 1e-6, offset)
        .map_err(e(op))?;
    let xn = b.read(&normed, 0, m * k).await.map_err(e(op))?;
    let scratch = b.alloc("normed scratch", m * k).map_err(e(op))?;
    let norm_in = || MatmulInput::RmsNormed {
        x: &xd,
        weight: &nwd,
        eps: 1e-6,
        offset,
        normed: &scratch,
    };
    let mut said = Vec::new();
    for scales in LAYOUTS {
        let (wg, wu) = (
            random_q4_as(&mut rng, scales, n, k),
            random_q4_as(&mut rng, scales, n, k),
        );
        let (gd, ud) = (
            b.upload_q4("gate", &wg).map_err(e(op))?,
            b.upload_q4("up", &wu).map_err(e(op))?,
        );
        // The residual uploaded, and the same written by a kernel (as a model's is).
        let acc = b.upload("acc", &acc0).map_err(e(op))?;
        let acc2 = b.alloc("acc2", m * n).map_err(e(op))?;
        b.copy(&acc, 0, &acc2, 0, m * n).map_err(e(op))?;
        let [t1, t2, out] = ["t1", "t2", "out"].map(|l| b.alloc(l, m * n));
        let (t1, t2, out) = (t1.map_err(e(op))?, t2.map_err(e(op))?, out.map_err(e(op))?);
        b.q4_matmul_add(&xd, &gd, &acc, &t1, (m, m * n), kernel)
            .map_err(e(op))?;
        b.q4_matmul_add(&xd, &gd, &acc2, &t1, (m, m * n), kernel)
            .map_err(e(op))?;
        let plain = MatmulInput::Plain(&xd);
        b.q4_matmul_glu(plain, (&gd, &ud), (&t1, &t2), &out, (m, m * n), kernel)
            .map_err(e(op))?;
        let out_n = b.alloc("out normed", m * n).map_err(e(op))?;
        b.q4_matmul_glu(
            norm_in(),
            (&gd, &ud),
            (&t1, &t2),
            &out_n,
            (m, m * n),
            kernel,
        )
        .map_err(e(op))?;
        let (g, u) = (q4_oracle(b, &x, &wg, m), q4_oracle(b, &x, &wu, m));
        let want_add: Vec<f64> = g.iter().zip(&acc0).map(|(a, &c)| a + c as f64).collect();
        let silu_mul = |g: &[f64], u: &[f64]| -> Vec<f64> {
            g.iter()
                .zip(u)
                .map(|(&g, &u)| g / (1.0 + (-g).exp()) * u)
                .collect()
        };
        let want_glu = silu_mul(&g, &u);
        let want_glu_n = silu_mul(&q4_oracle(b, &xn, &wg, m), &q4_oracle(b, &xn, &wu, m));
        let shape = format!("{} {kernel:?} m={m} n={n} k={k}", wg.layout_name());
        let got = b.read(&acc, 0, m * n).await.map_err(e(op))?;
        let add = compare(
            "q4_matmul_add",
            shape.clone(),
            bounds::Q4_MATMUL,
            &want_add,
            &got,
        )?;
        let got = b.read(&acc2, 0, m * n).await.map_err(e(op))?;
        let what = "q4_matmul_add (the residual written by a kernel)";
        compare(what, shape.clone(), bounds::Q4_MATMUL, &want_add, &got)?;
        let got = b.read(&out, 0, m * n).await.map_err(e(op))?;
        let glu = compare(
            "q4_matmul_glu",
            shape.clone(),
            bounds::Q4_MATMUL,
            &want_glu,
            &got,
        )?;
        let got = b.read(&out_n, 0, m * n).await.map_err(e(op))?;
        let what = "q4_matmul_glu after RMSNorm";
        compare(what, shape, bounds::Q4_MATMUL, &want_glu_n, &got)?;
        said.push(format!("{add}; {glu}"));
    }
    // Several matrices of one width over the same activations (`q4_matmul_many`: a layer's q,
    // k and v, or Qwen3.5's four input projections), each of another layout and row count,
    // against the oracle's matmul of each.
    let mut ws = Vec::new();
    for (i, &scales) in LAYOUTS.iter().chain(LAYOUTS.iter().take(1)).enumerate() {
        let rows = rng.range(1, 120) + 17 * i;
        ws.push(random_q4_as(&mut rng, scales, rows, k));
    }
    let mut parts = Vec::new();
    for w in &ws {
        let wd = b.upload_q4("w", w).map_err(e(op))?;
        parts.push((wd, b.alloc("out", m * w.rows).map_err(e(op))?));
    }
    let refs: Vec<(&B::Q4, &B::Buffer)> = parts.iter().map(|(w, o)| (w, o)).collect();
    b.q4_matmul_many(MatmulInput::Plain(&xd), &refs, m, kernel)
        .map_err(e(op))?;
    for (w, (_, out)) in ws.iter().zip(&parts) {
        let got = b.read(out, 0, m * w.rows).await.map_err(e(op))?;
        let shape = format!("{} {kernel:?} m={m} n={} k={k}", w.layout_name(), w.rows);
        let what = "q4_matmul_many";
        said.push(compare(
            what,
            shape,
            bounds::Q4_MATMUL,
            &q4_oracle(b, &x, w, m),
            &got,
        )?);
    }
    // Three or four matrices of one layout after the input's norm (q, k and v, or Qwen3.5's
    // four projections: a GPU's GEMV takes three per dispatch, its norm in the prologue).
    for (li, &scales) in LAYOUTS.iter().enumerate() {
        let ws: Vec<Q4Matrix> = (0..3 + li % 2)
            .map(|i| {
                let rows = rng.range(1, 90) + 33 * i;
                random_q4_as(&mut rng, scales, rows, k)
            })
            .collect();
        let mut parts = Vec::new();
        for w in &ws {
            let wd = b.upload_q4("w", w).map_err(e(op))?;
            parts.push((wd, b.alloc("out", m * w.rows).map_err(e(op))?));
        }
        let refs: Vec<(&B::Q4, &B::Buffer)> = parts.iter().map(|(w, o)| (w, o)).collect();
        b.q4_matmul_many(norm_in(), &refs, m, kernel)
            .map_err(e(op))?;
        for (w, (_, out)) in ws.iter().zip(&parts) {
            let got = b.read(out, 0, m * w.rows).await.map_err(e(op))?;
            let shape = format!("{} {kernel:?} m={m} n={} k={k}", w.layout_name(), w.rows);
            let what = "q4_matmul_many after RMSNorm";
            compare(
                what,
                shape,
                bounds::Q4_MATMUL,
                &q4_oracle(b, &xn, w, m),
                &got,
            )?;
        }
    }
    Ok(said.join("; "))
}

/// The CPU's row kernels for the instruction set in use (AVX2 natively here, `simd128` in
/// Chromium's wasm, relaxed SIMD in the page's threaded build) against the portable scalar
/// ones, through `rows_dot` as the GEMV calls it: every layout (`LAYOUTS`), one and five
/// activation rows, a block of rows inside the matrix, every group count from 1 to 9 and
/// 18–19 (each remainder of the SIMD forms' two- and four-group steps).
pub fn cpu_rows(seed: u64) -> Check {
    use lorekeeper_engine::cpu::q8::Q8Rows;
    use lorekeeper_engine::cpu::simd::{rows_dot, Isa, RowBlock};
    let op = "cpu_rows";
    let mut rng = Pcg32::new(seed + 1300);
    let isa = Isa::best();
    let mut worst = 0f64;
    for groups in (1..=9).chain(18..=19) {
        // One activation row (decode) for even group counts, five (prefill's tiles of four,
        // one partial) for odd ones.
        let (n, k, m) = (rng.range(6, 20), 32 * groups, 1 + 4 * (groups % 2));
        let x = rng.normal_vec(m * k, 1.0);
        for scales in LAYOUTS {
            let w = random_q4_as(&mut rng, scales, n, k);
            let mut xq = Q8Rows::default();
            if scales.natural_order() {
                xq.quantize_natural(&x, m, k);
            } else {
                xq.quantize(&x, m, k);
            }
            let block = RowBlock::of(&w);
            let mut scratch = vec![0f32; groups];
            let run = |isa: Isa, scratch: &mut [f32]| {
                let mut got = vec![f32::NAN; m * n];
                rows_dot(isa, block, 1..n - 1, &xq, scratch, |r0, mi, a, b| {
                    for (j, (&a, &b)) in a.iter().zip(b).enumerate() {
                        let (d, dmin) = w.row_scales(r0 + j);
                        got[mi * n + r0 + j] = d * a - dmin * b;
                    }
                });
                got
            };
            let want: Vec<f64> = run(Isa::Scalar, &mut scratch)
                .iter()
                .map(|&v| v as f64)
                .collect();
            let got = run(isa, &mut scratch);
            let shape = format!("{} {} m={m} n={n} k={k}", isa.name(), w.layout_name());
            // Rows outside the block stay unwritten (NaN in both).
            let inside = |i: &usize| (1..n - 1).contains(&(i % n));
            let (w_in, g_in): (Vec<f64>, Vec<f32>) =
                (0..m * n).filter(inside).map(|i| (want[i], got[i])).unzip();
            if (0..m * n).any(|i| !inside(&i) && !got[i].is_nan()) {
                return Err(format!("{op} {shape}: a row outside the block was written"));
            }
            compare(op, shape, bounds::Q4_MATMUL, &w_in, &g_in)?;
            let max = w_in
                .iter()
                .zip(&g_in)
                .map(|(a, &b)| (a - b as f64).abs())
                .fold(0f64, f64::max);
            worst = worst.max(max);
        }
    }
    Ok(format!(
        "{op} {}: groups 1–9, 18–19 on LQ4, lq4h, q8_0, q6_k, lq4k, q5: max abs err {worst:.2e} within {}",
        isa.name(),
        bounds::Q4_MATMUL
    ))
}

/// 4-bit GEMV (decode).
pub async fn q4_gemv<B: Backend>(b: &B, seed: u64) -> Check {
    q4_matmul(b, seed, MatmulKernel::Gemv).await
}

/// 4-bit GEMM (prefill).
pub async fn q4_gemm<B: Backend>(b: &B, seed: u64) -> Check {
    q4_matmul(b, seed, MatmulKernel::Gemm).await
}

async fn f32_matmul<B: Backend>(b: &B, seed: u64, kernel: MatmulKernel) -> Check {
    let op = match kernel {
        MatmulKernel::Gemv => "f32_gemv",
        MatmulKernel::Gemm => "f32_gemm",
    };
    let mut rng = Pcg32::new(seed);
    let (m, n, k) = match kernel {
        MatmulKernel::Gemv => (rng.range(1, 3), rng.range(1, 300), 4 * rng.range(1, 190)),
        MatmulKernel::Gemm => (rng.range(1, 70), rng.range(1, 100), 4 * rng.range(1, 100)),
    };
    let w = rng.normal_vec(n * k, 0.05);
    let x = rng.normal_vec(m * k, 1.0);
    let wd = b.upload("w", &w).map_err(e(op))?;
    let xd = b.upload("x", &x).map_err(e(op))?;
    let od = b.alloc("out", m * n).map_err(e(op))?;
    b.f32_matmul(&xd, &wd, n, k, &od, m, kernel)
        .map_err(e(op))?;
    let got = b.read(&od, 0, m * n).await.map_err(e(op))?;
    let want: Vec<f64> = (0..m * n)
        .map(|i| {
            let (mi, r) = (i / n, i % n);
            (0..k)
                .map(|j| x[mi * k + j] as f64 * w[r * k + j] as f64)
                .sum()
        })
        .collect();
    compare(
        op,
        format!("m={m} n={n} k={k}"),
        bounds::Q4_MATMUL,
        &want,
        &got,
    )
}

/// f32 GEMV (decode), `k` any multiple of 4.
pub async fn f32_gemv<B: Backend>(b: &B, seed: u64) -> Check {
    f32_matmul(b, seed, MatmulKernel::Gemv).await
}

/// f32 GEMM (prefill), `k` any multiple of 4 (not of the 32-wide k step).
pub async fn f32_gemm<B: Backend>(b: &B, seed: u64) -> Check {
    f32_matmul(b, seed, MatmulKernel::Gemm).await
}

/// RMSNorm, plain and `(1 + w)` forms.
pub async fn rms_norm<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "rms_norm";
    let mut rng = Pcg32::new(seed);
    let (rows, dim) = (rng.range(1, 9), rng.range(1, 700));
    let offset = (seed % 2) as f32;
    let eps = 1e-6;
    let x = rng.normal_vec(rows * dim, 2.0);
    let w = rng.normal_vec(dim, 1.0);
    let (xd, wd, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("w", &w).map_err(e(op))?,
        b.alloc("o", rows * dim).map_err(e(op))?,
    );
    b.rms_norm(&xd, &wd, &od, rows, dim, eps, offset)
        .map_err(e(op))?;
    let got = b.read(&od, 0, rows * dim).await.map_err(e(op))?;
    compare(
        op,
        format!("rows={rows} dim={dim} offset={offset}"),
        bounds::RMS_NORM,
        &oracle::rms_norm(&x, &w, rows, dim, eps, offset),
        &got,
    )
}

/// RoPE, full and partial rotary, at an offset position.
pub async fn rope<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "rope";
    let mut rng = Pcg32::new(seed);
    let (tokens, heads) = (rng.range(1, 5), rng.range(1, 6));
    let head_dim = 2 * rng.range(1, 65);
    let rot = if seed.is_multiple_of(2) {
        head_dim
    } else {
        2 * rng.range(1, head_dim / 2)
    };
    let pos0 = rng.range(0, 50);
    let table = rope_table(1_000_000.0, rot, pos0 + tokens);
    let x = rng.normal_vec(tokens * heads * head_dim, 1.0);
    let s = RopeShape {
        tokens,
        heads,
        head_dim,
        rot_dim: rot,
        pos0,
    };
    let (xd, td) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("table", &table).map_err(e(op))?,
    );
    b.rope(&xd, &td, s).map_err(e(op))?;
    let got = b.read(&xd, 0, x.len()).await.map_err(e(op))?;
    compare(
        op,
        format!("tokens={tokens} heads={heads} head_dim={head_dim} rot={rot} pos0={pos0}"),
        bounds::ROPE,
        &oracle::rope(&x, &table, tokens, heads, head_dim, rot, pos0),
        &got,
    )
}

/// RMSNorm per head then RoPE ([`Backend::rms_norm_rope`]), full and partial rotary, plain
/// and `(1 + w)` weights, against the oracle's norm followed by its rotation.
pub async fn rms_norm_rope<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "rms_norm_rope";
    let mut rng = Pcg32::new(seed + 500);
    let (tokens, heads) = (rng.range(1, 5), rng.range(1, 9));
    let head_dim = 2 * rng.range(1, 80);
    let rot = if seed.is_multiple_of(2) {
        head_dim
    } else {
        2 * rng.range(1, head_dim / 2)
    };
    let (pos0, offset, eps) = (rng.range(0, 50), (seed % 2) as f32, 1e-6);
    let table = rope_table(1_000_000.0, rot, pos0 + tokens);
    let x = rng.normal_vec(tokens * heads * head_dim, 2.0);
    let w = rng.normal_vec(head_dim, 1.0);
    let s = RopeShape {
        tokens,
        heads,
        head_dim,
        rot_dim: rot,
        pos0,
    };
    let (xd, wd, td, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("w", &w).map_err(e(op))?,
        b.upload("table", &table).map_err(e(op))?,
        b.alloc("o", x.len()).map_err(e(op))?,
    );
    b.rms_norm_rope(&xd, &wd, &od, (eps, offset), &td, s)
        .map_err(e(op))?;
    let got = b.read(&od, 0, x.len()).await.map_err(e(op))?;
    let rows = tokens * heads;
    let normed: Vec<f32> = oracle::rms_norm(&x, &w, rows, head_dim, eps, offset)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let want = oracle::rope(&normed, &table, tokens, heads, head_dim, rot, pos0);
    let shape = format!("tokens={tokens} heads={heads} head_dim={head_dim} rot={rot} pos0={pos0}");
    let said = compare(op, shape.clone(), bounds::RMS_NORM, &want, &got)?;
    // The same as the queries of a pair (`rms_norm_rope_pair`), beside keys of another head
    // count and weight.
    let heads2 = rng.range(1, 4);
    let x2 = rng.normal_vec(tokens * heads2 * head_dim, 2.0);
    let w2 = rng.normal_vec(head_dim, 1.0);
    let s2 = RopeShape { heads: heads2, ..s };
    let (x2d, w2d, o1, o2) = (
        b.upload("x2", &x2).map_err(e(op))?,
        b.upload("w2", &w2).map_err(e(op))?,
        b.alloc("o1", x.len()).map_err(e(op))?,
        b.alloc("o2", x2.len()).map_err(e(op))?,
    );
    let qk = [(&xd, &wd, &o1), (&x2d, &w2d, &o2)];
    b.rms_norm_rope_pair(qk, (eps, offset), &td, [s, s2])
        .map_err(e(op))?;
    let got = b.read(&o1, 0, x.len()).await.map_err(e(op))?;
    let what = "rms_norm_rope_pair (queries)";
    compare(what, shape.clone(), bounds::RMS_NORM, &want, &got)?;
    let normed2: Vec<f32> = oracle::rms_norm(&x2, &w2, tokens * heads2, head_dim, eps, offset)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let want2 = oracle::rope(&normed2, &table, tokens, heads2, head_dim, rot, pos0);
    let got = b.read(&o2, 0, x2.len()).await.map_err(e(op))?;
    let what = "rms_norm_rope_pair (keys)";
    compare(
        what,
        format!("{shape} heads2={heads2}"),
        bounds::RMS_NORM,
        &want2,
        &got,
    )?;
    Ok(said)
}

/// Causal attention over KV caches in f32 and in f16 (every backend takes both; its own
/// format, [`Backend::kv_format`], is one of them): the cache filled in two writes (the
/// prompt, then the new tokens from an offset in their buffer), slots past them NaN; decode
/// (even seeds), a few tokens (odd seeds) and, every third seed, 5–9 tokens after a long cache
/// (the CPU's blocked path, which widens an f16 cache); then, in each format, one decode step
/// with head_dim a multiple of 4 (the GPU's decode kernel). Odd seeds take an odd row after an
/// odd number of positions, so an f16 cache's writes start and end inside a word of two
/// halves. The oracle reads the keys and values rounded to the cache's format.
pub async fn attention_kv<B: Backend>(b: &B, seed: u64) -> Check {
    for format in [KvFormat::F32, KvFormat::F16] {
        attention_kv_in(b, seed, format, false).await?;
    }
    attention_kv_in(b, seed, KvFormat::F32, true).await?;
    attention_kv_in(b, seed, KvFormat::F16, true).await
}

async fn attention_kv_in<B: Backend>(b: &B, seed: u64, format: KvFormat, by4: bool) -> Check {
    let op = "attention over KV caches";
    let mut rng = Pcg32::new(seed + 300);
    let tokens = match (seed % 2, seed % 3) {
        _ if by4 => 1,
        (_, 2) => rng.range(5, 10),
        (0, _) => 1,
        _ => rng.range(2, 4),
    };
    let odd = seed % 2 == 1 && !by4;
    let kv_heads = if odd {
        1 + 2 * rng.range(0, 1)
    } else {
        rng.range(1, 3)
    };
    let heads = kv_heads * rng.range(1, 4);
    let head_dim = if by4 {
        4 * rng.range(1, 32)
    } else if odd {
        2 * rng.range(0, 64) + 1
    } else {
        rng.range(1, 130)
    };
    let pos0 = if seed % 3 == 2 {
        rng.range(129, 400)
    } else {
        rng.range(0, 80)
    } | usize::from(odd);
    let ctx = pos0 + tokens + rng.range(1, 9);
    let row = kv_heads * head_dim;
    let (old, new) = (pos0 * row, tokens * row);
    let lead = rng.range(0, 7);
    let k = rng.normal_vec(old + new, 1.0);
    let v = rng.normal_vec(old + new, 1.0);
    let q = rng.normal_vec(tokens * heads * head_dim, 1.0);
    let upload = |label, x: &[f32]| b.upload(label, x).map_err(e(op));
    // The new rows behind `lead` values of padding, as a projection's output block would be.
    let with_lead = |x: &[f32]| [vec![0.5; lead], x[old..].to_vec()].concat();
    let (k_old, v_old) = (
        upload("k", &k[..old.max(1)])?,
        upload("v", &v[..old.max(1)])?,
    );
    let (k_new, v_new) = (upload("k", &with_lead(&k))?, upload("v", &with_lead(&v))?);
    let nan = upload("nan", &vec![f32::NAN; (ctx * row) - old - new])?;
    let mut caches = Vec::new();
    for first in [&k_old, &v_old] {
        let c = b.alloc_kv("cache", ctx * row, format).map_err(e(op))?;
        b.write_kv(first, 0, &c, 0, old).map_err(e(op))?;
        caches.push(c);
    }
    // The new keys and values appended together (`write_kv_pair`, as a layer appends them),
    // then NaN past them: attention must not read there.
    let pair = [&caches[0], &caches[1]];
    b.write_kv_pair([&k_new, &v_new], lead, pair, old, new)
        .map_err(e(op))?;
    for c in &caches {
        b.write_kv(&nan, 0, c, old + new, ctx * row - old - new)
            .map_err(e(op))?;
    }
    let c = AppendCase {
        tokens,
        heads,
        kv_heads,
        head_dim,
        pos0,
        ctx,
        table: Vec::new(),
        old: [k[..old].to_vec(), v[..old].to_vec()],
        q,
        k: k[old..].to_vec(),
        v: v[old..].to_vec(),
    };
    let qd = upload("q", &c.q)?;
    c.attention(b, (&qd, &c.q), &caches, (&c.k, format), (op, ""))
        .await
}

/// Prefill attention over an f32 and an f16 KV cache: 9–70 query tokens (more than a
/// workgroup of the rasterisers' rows kernel takes, and rarely a multiple of it) after 0–200
/// earlier positions, a group of 1, 2, 3, 4, 5 or 8 query heads per KV head, head_dim a
/// multiple of 8, of 4 only (the f16 cache's narrow words), or neither (the one-pass kernel),
/// causal as a decoder's prompt; NaN past the new positions.
pub async fn attention_prefill<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "prefill attention over KV caches";
    let mut rng = Pcg32::new(seed + 900);
    let mut lines = Vec::new();
    for (n, format) in [KvFormat::F32, KvFormat::F16].into_iter().enumerate() {
        let pick = seed as usize * 2 + n;
        let tokens = rng.range(9, 70);
        let kv_heads = rng.range(1, 3);
        let heads = kv_heads * [1, 2, 3, 4, 5, 8][pick % 6];
        let head_dim = match pick % 4 {
            0 => 8 * rng.range(1, 16),
            1 => 8 * rng.range(0, 15) + 4,
            2 => 64,
            _ => 4 * rng.range(0, 31) + 1 + rng.range(0, 2),
        };
        let pos0 = rng.range(0, 200);
        let ctx = pos0 + tokens + rng.range(1, 9);
        // Seed 4's f16 case: Qwen3.5's full-attention shape (4 query heads a KV head of 256),
        // the widest rows the GPUs' tiled kernel takes (1 token, 3 keys a tile).
        let dims = if pick == 9 {
            [tokens, 8, 2, 256, pos0, ctx]
        } else {
            [tokens, heads, kv_heads, head_dim, pos0, ctx]
        };
        let c = AppendCase::random(&mut rng, dims, 1.0);
        let caches = c.caches(b, format, op)?;
        for (cache, new) in caches.iter().zip([&c.k, &c.v]) {
            let nd = b.upload("new", new).map_err(e(op))?;
            b.write_kv(&nd, 0, cache, c.dst(), new.len())
                .map_err(e(op))?;
        }
        let qd = b.upload("q", &c.q).map_err(e(op))?;
        lines.push(
            c.attention(b, (&qd, &c.q), &caches, (&c.k, format), (op, ""))
                .await?,
        );
    }
    Ok(lines.join("; "))
}

/// `x` as a KV cache in `format` holds it (f16: rounded to the nearest half, ties to even).
fn as_stored(format: KvFormat, x: &[f32]) -> Vec<f32> {
    match format {
        KvFormat::F32 => x.to_vec(),
        KvFormat::F16 => x.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
    }
}

/// RoPE of a layer's queries and keys with the keys and values appended to its caches
/// ([`Backend::rope_append`]), into an f32 and an f16 cache: q and k rotated in place as the
/// oracle rotates them, and attention over the caches (earlier positions written first, NaN
/// past the new ones) equal to the oracle's over the keys and values as the cache stores them.
/// Decode (even seeds) and 2–5 tokens (odd seeds); head_dim a multiple of 4 (every published
/// model's: the GPU's one-pass form), and on seed 3 one that is not (the plain ops).
pub async fn rope_append<B: Backend>(b: &B, seed: u64) -> Check {
    rope_append_in(b, seed, KvFormat::F32).await?;
    rope_append_in(b, seed, KvFormat::F16).await
}

/// A layer's step between its projections and its attention, as the `rope_append` checks
/// draw it: queries, keys and values of `tokens` at `pos0`, the cache's earlier positions, and
/// a full-rotary table.
struct AppendCase {
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    pos0: usize,
    ctx: usize,
    table: Vec<f32>,
    old: [Vec<f32>; 2],
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl AppendCase {
    /// Decode on even seeds, 2–5 tokens on odd ones; 1–3 KV heads with 1–3 query heads each;
    /// queries and keys of standard deviation `sd`.
    fn draw(rng: &mut Pcg32, seed: u64, head_dim: usize, max_pos: usize, sd: f32) -> Self {
        let tokens = if seed.is_multiple_of(2) {
            1
        } else {
            rng.range(2, 6)
        };
        let kv_heads = rng.range(1, 4);
        let heads = kv_heads * rng.range(1, 4);
        let pos0 = rng.range(0, max_pos);
        let ctx = pos0 + tokens + rng.range(1, 6);
        let mut c = AppendCase::random(rng, [tokens, heads, kv_heads, head_dim, pos0, ctx], sd);
        c.table = rope_table(1_000_000.0, head_dim, ctx);
        c
    }

    /// `[tokens, heads, kv_heads, head_dim, pos0, ctx]` with random earlier keys and values,
    /// queries and keys of standard deviation `sd`, values of 1, and no rotary table.
    fn random(rng: &mut Pcg32, dims: [usize; 6], sd: f32) -> Self {
        let [tokens, heads, kv_heads, head_dim, pos0, ctx] = dims;
        let row = kv_heads * head_dim;
        let old = [
            rng.normal_vec(pos0 * row, 1.0),
            rng.normal_vec(pos0 * row, 1.0),
        ];
        AppendCase {
            tokens,
            heads,
            kv_heads,
            head_dim,
            pos0,
            ctx,
            table: Vec::new(),
            old,
            q: rng.normal_vec(tokens * heads * head_dim, sd),
            k: rng.normal_vec(tokens * row, sd),
            v: rng.normal_vec(tokens * row, 1.0),
        }
    }

    /// Where the new keys and values go in the caches.
    fn dst(&self) -> usize {
        self.pos0 * self.kv_heads * self.head_dim
    }

    fn shapes(&self) -> [RopeShape; 2] {
        let shape = |heads| RopeShape {
            tokens: self.tokens,
            heads,
            head_dim: self.head_dim,
            rot_dim: self.head_dim,
            pos0: self.pos0,
        };
        [shape(self.heads), shape(self.kv_heads)]
    }

    fn dims(&self, format: KvFormat) -> String {
        format!(
            "{format:?} tokens={} heads={}/{} head_dim={} pos0={} ctx={}",
            self.tokens, self.heads, self.kv_heads, self.head_dim, self.pos0, self.ctx
        )
    }

    /// The caches in `format` with the earlier positions written and NaN past the new ones
    /// (attention must not read there).
    fn caches<B: Backend>(
        &self,
        b: &B,
        format: KvFormat,
        op: &'static str,
    ) -> Result<Vec<B::Kv>, String> {
        let len = self.ctx * self.kv_heads * self.head_dim;
        let (old, end) = (self.dst(), self.dst() + self.k.len());
        let nan = b.upload("nan", &vec![f32::NAN; len - end]).map_err(e(op))?;
        let mut caches = Vec::new();
        for first in &self.old {
            let c = b.alloc_kv("cache", len, format).map_err(e(op))?;
            if old > 0 {
                let first = b.upload("old", first).map_err(e(op))?;
                b.write_kv(&first, 0, &c, 0, old).map_err(e(op))?;
            }
            b.write_kv(&nan, 0, &c, end, len - end).map_err(e(op))?;
            caches.push(c);
        }
        Ok(caches)
    }

    /// Attention of the queries `qd` (read back as `q`) over the caches, against the oracle's
    /// over the earlier positions and the new keys `k` and the values, as a cache in `format`
    /// holds them; the check's line starts with `what`.
    async fn attention<B: Backend>(
        &self,
        b: &B,
        (qd, q): (&B::Buffer, &[f32]),
        caches: &[B::Kv],
        (k, format): (&[f32], KvFormat),
        (op, what): (&'static str, &str),
    ) -> Check {
        let s = AttnShape {
            tokens: self.tokens,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            pos0: self.pos0,
            ctx: self.ctx,
            scale: 1.0 / (self.head_dim as f32).sqrt(),
            causal: true,
        };
        let od = b.alloc("o", q.len()).map_err(e(op))?;
        b.attention_kv(qd, &caches[0], &caches[1], &od, s)
            .map_err(e(op))?;
        let got = b.read(&od, 0, q.len()).await.map_err(e(op))?;
        let want = oracle::attention(
            q,
            &as_stored(format, &[&self.old[0][..], k].concat()),
            &as_stored(format, &[&self.old[1][..], &self.v[..]].concat()),
            self.tokens,
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.pos0,
            s.scale,
            true,
        );
        let dims = self.dims(format);
        compare(op, format!("{what}{dims}"), bounds::ATTENTION, &want, &got)
    }
}

async fn rope_append_in<B: Backend>(b: &B, seed: u64, format: KvFormat) -> Check {
    let op = "rope_append";
    let mut rng = Pcg32::new(seed + 700);
    let head_dim = if seed % 4 == 3 {
        4 * rng.range(1, 20) + 2
    } else {
        4 * rng.range(1, 33)
    };
    let c = AppendCase::draw(&mut rng, seed, head_dim, 60, 1.0);
    let upload = |label, x: &[f32]| b.upload(label, x).map_err(e(op));
    let (qd, kd, vd, td) = (
        upload("q", &c.q)?,
        upload("k", &c.k)?,
        upload("v", &c.v)?,
        upload("table", &c.table)?,
    );
    let caches = c.caches(b, format, op)?;
    let pair = [&caches[0], &caches[1]];
    b.rope_append([&qd, &kd, &vd], &td, c.shapes(), pair, c.dst())
        .map_err(e(op))?;
    let dims = c.dims(format);
    let got_q = b.read(&qd, 0, c.q.len()).await.map_err(e(op))?;
    let got_k = b.read(&kd, 0, c.k.len()).await.map_err(e(op))?;
    let rotated = |x: &[f32], heads| {
        oracle::rope(x, &c.table, c.tokens, heads, c.head_dim, c.head_dim, c.pos0)
    };
    let want_q = rotated(&c.q, c.heads);
    compare(op, format!("q {dims}"), bounds::ROPE, &want_q, &got_q)?;
    let want_k = rotated(&c.k, c.kv_heads);
    compare(op, format!("k {dims}"), bounds::ROPE, &want_k, &got_k)?;
    // The oracle reads what the cache holds: the keys as rotated here (checked above).
    c.attention(
        b,
        (&qd, &got_q),
        &caches,
        (&got_k, format),
        (op, "attention after it, "),
    )
    .await
}

/// Qwen3's norms, rotation and KV append ([`Backend::rms_norm_rope_append`]), into an f32 and
/// an f16 cache: the queries normalised and rotated back in place as the oracle does it, then
/// attention over the caches (earlier positions written first, NaN past the new ones) equal to
/// the oracle's over its own normalised, rotated keys and the values as the cache stores them.
/// Decode (even seeds) and 2–5 tokens (odd seeds); head_dim even, not a multiple of 4 on odd
/// seeds, and on seed 4 the largest the GPU's one dispatch holds (256: a key row in workgroup
/// memory).
pub async fn rms_norm_rope_append<B: Backend>(b: &B, seed: u64) -> Check {
    rms_norm_rope_append_in(b, seed, KvFormat::F32).await?;
    rms_norm_rope_append_in(b, seed, KvFormat::F16).await
}

async fn rms_norm_rope_append_in<B: Backend>(b: &B, seed: u64, format: KvFormat) -> Check {
    let op = "rms_norm_rope_append";
    let mut rng = Pcg32::new(seed + 800);
    let head_dim = match seed % 4 {
        0 => 256,
        1 | 3 => 4 * rng.range(1, 32) + 2,
        _ => 4 * rng.range(1, 33),
    };
    let c = AppendCase::draw(&mut rng, seed, head_dim, 40, 2.0);
    let eps = 1e-6;
    let (wq, wk) = (rng.normal_vec(head_dim, 1.0), rng.normal_vec(head_dim, 1.0));
    let upload = |label, x: &[f32]| b.upload(label, x).map_err(e(op));
    let (qd, kd, vd, td) = (
        upload("q", &c.q)?,
        upload("k", &c.k)?,
        upload("v", &c.v)?,
        upload("table", &c.table)?,
    );
    let (wqd, wkd) = (upload("q_norm", &wq)?, upload("k_norm", &wk)?);
    let scratch = (
        b.alloc("q scratch", c.q.len()).map_err(e(op))?,
        b.alloc("k scratch", c.k.len()).map_err(e(op))?,
    );
    let caches = c.caches(b, format, op)?;
    b.rms_norm_rope_append(
        [&qd, &kd, &vd],
        [&wqd, &wkd],
        (eps, 0.0),
        &td,
        c.shapes(),
        [&scratch.0, &scratch.1],
        [&caches[0], &caches[1]],
        c.dst(),
    )
    .map_err(e(op))?;
    let normed_rotated = |x: &[f32], w: &[f32], heads: usize| {
        let rows = c.tokens * heads;
        let normed: Vec<f32> = oracle::rms_norm(x, w, rows, c.head_dim, eps, 0.0)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let (t, hd) = (c.tokens, c.head_dim);
        oracle::rope(&normed, &c.table, t, heads, hd, hd, c.pos0)
    };
    let got_q = b.read(&qd, 0, c.q.len()).await.map_err(e(op))?;
    let want_q = normed_rotated(&c.q, &wq, c.heads);
    let dims = c.dims(format);
    compare(op, format!("q {dims}"), bounds::RMS_NORM, &want_q, &got_q)?;
    // The keys are the oracle's own (the cache is read only through attention).
    let want_k: Vec<f32> = normed_rotated(&c.k, &wk, c.kv_heads)
        .iter()
        .map(|&v| v as f32)
        .collect();
    c.attention(
        b,
        (&qd, &got_q),
        &caches,
        (&want_k, format),
        (op, "attention after it, "),
    )
    .await
}

/// Grouped-query attention, causal (odd seeds and decode) and bidirectional (the encoder's,
/// even seeds with several tokens); cache slots past the filled positions hold NaN, so any
/// read beyond the visible keys fails the check.
/// A third run takes head_dim a multiple of 4 (every published model's; the GPU's 16-byte
/// decode kernel).
pub async fn attention<B: Backend>(b: &B, seed: u64) -> Check {
    attention_with(b, seed, true, false).await?;
    attention_with(b, seed + 100, false, false).await?;
    attention_with(b, seed + 200, true, true).await
}

async fn attention_with<B: Backend>(b: &B, seed: u64, causal: bool, dim4: bool) -> Check {
    let op = if causal {
        "attention"
    } else {
        "attention (bidirectional)"
    };
    let mut rng = Pcg32::new(seed);
    // Decode (even seeds), a few tokens (seeds 1, 5, …) and a prefill chunk past the GPU's
    // split-key (flash-decoding) path (seeds 3, 7, …).
    let tokens = if seed.is_multiple_of(2) {
        1
    } else if seed % 4 == 3 {
        rng.range(9, 14)
    } else {
        rng.range(2, 6)
    };
    // One to eight query heads per KV head (the split path serves up to eight).
    let kv_heads = rng.range(1, 3);
    let heads = kv_heads * rng.range(1, 9);
    let head_dim = if dim4 {
        4 * rng.range(1, 33)
    } else {
        rng.range(1, 130)
    };
    // Seeds 2, 5, 8, …: a long cache (more than 128 keys), where the CPU's decode path splits
    // the keys in ranges and merges their partial softmaxes.
    let pos0 = if seed % 3 == 2 {
        rng.range(129, 700)
    } else {
        rng.range(0, 80)
    };
    let ctx = pos0 + tokens + rng.range(0, 9);
    let filled = (pos0 + tokens) * kv_heads * head_dim;
    let mut k = rng.normal_vec(ctx * kv_heads * head_dim, 1.0);
    let mut v = rng.normal_vec(ctx * kv_heads * head_dim, 1.0);
    k[filled..].fill(f32::NAN);
    v[filled..].fill(f32::NAN);
    let q = rng.normal_vec(tokens * heads * head_dim, 1.0);
    let scale = 1.0 / (head_dim as f32).sqrt();
    let s = AttnShape {
        tokens,
        heads,
        kv_heads,
        head_dim,
        pos0,
        ctx,
        scale,
        causal,
    };
    let qd = b.upload("q", &q).map_err(e(op))?;
    let kd = b.upload("k", &k).map_err(e(op))?;
    let vd = b.upload("v", &v).map_err(e(op))?;
    let od = b.alloc("o", q.len()).map_err(e(op))?;
    b.attention(&qd, &kd, &vd, &od, s).map_err(e(op))?;
    let got = b.read(&od, 0, q.len()).await.map_err(e(op))?;
    let want = oracle::attention(
        &q, &k, &v, tokens, heads, kv_heads, head_dim, pos0, scale, causal,
    );
    compare(
        op,
        format!(
            "tokens={tokens} heads={heads}/{kv_heads} head_dim={head_dim} pos0={pos0} ctx={ctx} causal={causal}"
        ),
        bounds::ATTENTION,
        &want,
        &got,
    )
}

/// LayerNorm with weight and bias over random rows (offset mean, so centring matters).
pub async fn layer_norm<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "layer_norm";
    let mut rng = Pcg32::new(seed);
    let (rows, dim) = (rng.range(1, 9), rng.range(1, 1100));
    let x: Vec<f32> = rng
        .normal_vec(rows * dim, 2.0)
        .iter()
        .map(|v| v + 3.0)
        .collect();
    let w = rng.normal_vec(dim, 1.0);
    let bias = rng.normal_vec(dim, 1.0);
    let (xd, wd, bd, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("w", &w).map_err(e(op))?,
        b.upload("b", &bias).map_err(e(op))?,
        b.alloc("o", rows * dim).map_err(e(op))?,
    );
    b.layer_norm(&xd, &wd, &bd, &od, rows, dim, 1e-12)
        .map_err(e(op))?;
    let got = b.read(&od, 0, rows * dim).await.map_err(e(op))?;
    compare(
        op,
        format!("rows={rows} dim={dim}"),
        bounds::RMS_NORM,
        &oracle::layer_norm(&x, &w, &bias, rows, dim, 1e-12),
        &got,
    )
}

/// Bias add (in place) and exact GELU.
pub async fn bias_gelu<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "add_bias + gelu";
    let mut rng = Pcg32::new(seed);
    let (rows, cols) = (rng.range(1, 7), rng.range(1, 700));
    let x = rng.normal_vec(rows * cols, 2.5);
    let bias = rng.normal_vec(cols, 1.0);
    let (xd, bd, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("b", &bias).map_err(e(op))?,
        b.alloc("o", rows * cols).map_err(e(op))?,
    );
    b.add_bias(&xd, &bd, rows, cols).map_err(e(op))?;
    let biased = b.read(&xd, 0, rows * cols).await.map_err(e(op))?;
    let want_b: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f64 + bias[i % cols] as f64)
        .collect();
    compare(
        op,
        format!("rows={rows} cols={cols}"),
        bounds::ADD,
        &want_b,
        &biased,
    )?;
    b.gelu(&xd, &od, rows * cols).map_err(e(op))?;
    let got = b.read(&od, 0, rows * cols).await.map_err(e(op))?;
    let want: Vec<f64> = biased.iter().map(|&v| oracle::gelu(v as f64)).collect();
    compare(
        op,
        format!("gelu n={}", rows * cols),
        bounds::ELEMENTWISE,
        &want,
        &got,
    )
}

/// SiLU(gate) * up.
pub async fn silu_mul<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "silu_mul";
    let mut rng = Pcg32::new(seed);
    let n = rng.range(1, 5000);
    let g = rng.normal_vec(n, 3.0);
    let u = rng.normal_vec(n, 1.0);
    let (gd, ud, od) = (
        b.upload("g", &g).map_err(e(op))?,
        b.upload("u", &u).map_err(e(op))?,
        b.alloc("o", n).map_err(e(op))?,
    );
    b.silu_mul(&gd, &ud, &od, n).map_err(e(op))?;
    let got = b.read(&od, 0, n).await.map_err(e(op))?;
    compare(
        op,
        format!("n={n}"),
        bounds::ELEMENTWISE,
        &oracle::silu_mul(&g, &u),
        &got,
    )
}

/// Attention output gate `x * sigmoid(gate)`.
pub async fn sigmoid_mul<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "sigmoid_mul";
    let mut rng = Pcg32::new(seed);
    let n = rng.range(1, 5000);
    let x = rng.normal_vec(n, 1.0);
    let g = rng.normal_vec(n, 3.0);
    let (xd, gd, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("g", &g).map_err(e(op))?,
        b.alloc("o", n).map_err(e(op))?,
    );
    b.sigmoid_mul(&xd, &gd, &od, n).map_err(e(op))?;
    let got = b.read(&od, 0, n).await.map_err(e(op))?;
    compare(
        op,
        format!("n={n}"),
        bounds::ELEMENTWISE,
        &oracle::sigmoid_mul(&x, &g),
        &got,
    )
}

/// Splitting `[rows, 2, dim]` into its halves (exact copies).
pub async fn take_half<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "take_half";
    let mut rng = Pcg32::new(seed);
    let (rows, dim) = (rng.range(1, 90), rng.range(1, 300));
    let src = rng.normal_vec(rows * 2 * dim, 1.0);
    let sd = b.upload("src", &src).map_err(e(op))?;
    let mut worst = String::new();
    for half in 0..2 {
        let od = b.alloc("out", rows * dim).map_err(e(op))?;
        b.take_half(&sd, &od, rows, dim, half).map_err(e(op))?;
        let got = b.read(&od, 0, rows * dim).await.map_err(e(op))?;
        let want: Vec<f64> = (0..rows * dim)
            .map(|i| src[(i / dim) * 2 * dim + half * dim + i % dim] as f64)
            .collect();
        worst = compare(
            op,
            format!("rows={rows} dim={dim} half={half}"),
            Tolerance::new(0.0, 0.0),
            &want,
            &got,
        )?;
    }
    Ok(worst)
}

/// Causal depthwise conv1d + SiLU continuing a random state: the output and the new state.
pub async fn conv1d<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "conv1d_silu";
    let mut rng = Pcg32::new(seed);
    let (t, c, k) = (rng.range(1, 20), rng.range(1, 700), rng.range(2, 8));
    let x = rng.normal_vec(t * c, 1.0);
    let w = rng.normal_vec(c * k, 0.5);
    let st = rng.normal_vec((k - 1) * c, 1.0);
    let (xd, wd, sd, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.upload("w", &w).map_err(e(op))?,
        b.upload("state", &st).map_err(e(op))?,
        b.alloc("out", t * c).map_err(e(op))?,
    );
    b.conv1d_silu(&xd, &wd, &sd, &od, t, c, k).map_err(e(op))?;
    let got = b.read(&od, 0, t * c).await.map_err(e(op))?;
    let got_state = b.read(&sd, 0, (k - 1) * c).await.map_err(e(op))?;
    let (want, want_state) = oracle::conv1d_silu(&x, &w, &st, t, c, k);
    let shape = format!("tokens={t} channels={c} kernel={k}");
    compare(
        op,
        format!("{shape} (state)"),
        bounds::CONV1D,
        &want_state,
        &got_state,
    )?;
    compare(op, shape, bounds::CONV1D, &want, &got)
}

/// Random gated-delta-rule inputs: `(qkv, a, b, a_log, dt_bias, state)`.
pub type DeltaInputs = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

/// A random delta-rule shape (dimensions not multiples of the workgroup size; more value
/// columns than one workgroup sometimes) and inputs.
pub fn delta_case(rng: &mut Pcg32) -> (DeltaShape, DeltaInputs) {
    let nk = rng.range(1, 4);
    let s = DeltaShape {
        tokens: rng.range(1, 40),
        k_heads: nk,
        v_heads: nk * rng.range(1, 4),
        k_dim: rng.range(2, 128),
        v_dim: rng.range(1, 150),
    };
    let t = s.tokens;
    let a_log: Vec<f32> = (0..s.v_heads)
        .map(|_| rng.uniform(0.01, 4.0).ln())
        .collect();
    let inputs = (
        rng.normal_vec(t * s.qkv_stride(), 1.0),
        rng.normal_vec(t * s.v_heads, 1.5),
        rng.normal_vec(t * s.v_heads, 1.5),
        a_log,
        rng.normal_vec(s.v_heads, 0.5),
        rng.normal_vec(s.v_heads * s.k_dim * s.v_dim, 0.3),
    );
    (s, inputs)
}

/// The gated delta rule from a random state over a random chunk: the output and the new state.
pub async fn delta_rule<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "gated_delta_rule";
    let mut rng = Pcg32::new(seed);
    let (s, (qkv, a, bb, a_log, dt, st)) = delta_case(&mut rng);
    let up = |n: &str, v: &[f32]| b.upload(n, v).map_err(e(op));
    let (qd, ad, bd, ld, dd, sd) = (
        up("qkv", &qkv)?,
        up("a", &a)?,
        up("b", &bb)?,
        up("a_log", &a_log)?,
        up("dt_bias", &dt)?,
        up("state", &st)?,
    );
    let n = s.tokens * s.v_heads * s.v_dim;
    let od = b.alloc("out", n).map_err(e(op))?;
    b.gated_delta_rule(&qd, &ad, &bd, &ld, &dd, &sd, &od, s)
        .map_err(e(op))?;
    let got = b.read(&od, 0, n).await.map_err(e(op))?;
    let got_state = b.read(&sd, 0, st.len()).await.map_err(e(op))?;
    let (want, want_state) = oracle::gated_delta_rule(
        &qkv,
        &a,
        &bb,
        &a_log,
        &dt,
        &st,
        (s.tokens, s.k_heads, s.v_heads, s.k_dim, s.v_dim),
    );
    let shape = format!(
        "tokens={} heads={}k/{}v dk={} dv={}",
        s.tokens, s.k_heads, s.v_heads, s.k_dim, s.v_dim
    );
    compare(
        op,
        format!("{shape} (state)"),
        bounds::DELTA_RULE,
        &want_state,
        &got_state,
    )?;
    compare(op, shape, bounds::DELTA_RULE, &want, &got)
}

/// Residual add in place; elements past `n` must stay untouched.
pub async fn add<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "add_assign";
    let mut rng = Pcg32::new(seed);
    let n = rng.range(1, 5000);
    let extra = rng.range(1, 40);
    let a = rng.normal_vec(n + extra, 1.0);
    let x = rng.normal_vec(n + extra, 1.0);
    let (ad, xd) = (
        b.upload("a", &a).map_err(e(op))?,
        b.upload("x", &x).map_err(e(op))?,
    );
    b.add_assign(&ad, &xd, n).map_err(e(op))?;
    let got = b.read(&ad, 0, n + extra).await.map_err(e(op))?;
    let want: Vec<f64> = (0..n + extra)
        .map(|i| {
            if i < n {
                a[i] as f64 + x[i] as f64
            } else {
                a[i] as f64
            }
        })
        .collect();
    compare(
        op,
        format!("n={n} (+{extra} untouched)"),
        bounds::ADD,
        &want,
        &got,
    )
}

/// Row softmax.
pub async fn softmax<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "softmax";
    let mut rng = Pcg32::new(seed);
    let (rows, cols) = (rng.range(1, 5), rng.range(1, 3000));
    let x = rng.normal_vec(rows * cols, 4.0);
    let (xd, od) = (
        b.upload("x", &x).map_err(e(op))?,
        b.alloc("o", rows * cols).map_err(e(op))?,
    );
    b.softmax(&xd, &od, rows, cols).map_err(e(op))?;
    let got = b.read(&od, 0, rows * cols).await.map_err(e(op))?;
    compare(
        op,
        format!("rows={rows} cols={cols}"),
        bounds::SOFTMAX,
        &oracle::softmax(&x, rows, cols),
        &got,
    )
}

/// Embedding rows gathered from an LQ4 table (repeated ids included).
pub async fn embed_q4<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "embed_q4";
    let mut rng = Pcg32::new(seed);
    let (vocab, cols, tokens) = (rng.range(1, 200), 32 * rng.range(1, 10), rng.range(1, 7));
    let ids: Vec<u32> = (0..tokens)
        .map(|_| rng.range(0, vocab - 1) as u32)
        .collect();
    let mut said = Vec::new();
    for scales in LAYOUTS {
        let w = random_q4_as(&mut rng, scales, vocab, cols);
        let wd = b.upload_q4("table", &w).map_err(e(op))?;
        let od = b.alloc("o", tokens * cols).map_err(e(op))?;
        b.embed_q4(&ids, &wd, &od).map_err(e(op))?;
        let got = b.read(&od, 0, tokens * cols).await.map_err(e(op))?;
        let w = &*as_run(b, &w);
        let want: Vec<f64> = ids
            .iter()
            .flat_map(|&id| (0..cols).map(move |k| (id as usize, k)))
            .map(|(id, k)| oracle::q4_weight(w, id, k))
            .collect();
        said.push(compare(
            op,
            format!(
                "{} vocab={vocab} cols={cols} tokens={tokens}",
                w.layout_name()
            ),
            bounds::EMBED,
            &want,
            &got,
        )?);
    }
    Ok(said.join("; "))
}

/// Top-k with ties and a NaN, multi-stage when `n` is large, plus the normaliser.
pub async fn select<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "select";
    let mut rng = Pcg32::new(seed);
    let n = if seed.is_multiple_of(2) {
        rng.range(1, 4000)
    } else {
        rng.range(4097, 40000)
    };
    let k = rng.range(1, 64.min(n));
    // Few distinct levels, so ties are frequent and the lower-id rule is exercised.
    let mut x: Vec<f32> = (0..n).map(|_| (rng.normal() * 4.0).round() / 2.0).collect();
    let nan_at = rng.range(0, n - 1);
    x[nan_at] = f32::NAN;
    let inv_temp = 1.0 / rng.uniform(0.3, 1.5);
    let xd = b.upload("logits", &x).map_err(e(op))?;
    let got = b.select(&xd, n, k, Some(inv_temp)).await.map_err(e(op))?;
    // Oracle: stable sort, descending, NaN lowest.
    let key = |v: f32| if v.is_nan() { f32::MIN } else { v };
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &c| key(x[c]).total_cmp(&key(x[a])).then(a.cmp(&c)));
    let want: Vec<(u32, f32)> = idx[..k].iter().map(|&i| (i as u32, key(x[i]))).collect();
    if got.top != want {
        let at = got
            .top
            .iter()
            .zip(&want)
            .position(|(g, w)| g != w)
            .unwrap_or(0);
        return Err(format!(
            "{op} n={n} k={k}: top-k differs at rank {at}: got {:?}, want {:?}",
            got.top.get(at),
            want.get(at)
        ));
    }
    let mx = want[0].1 as f64;
    let z: f64 = x
        .iter()
        .filter(|v| !v.is_nan())
        .map(|&v| ((v as f64 - mx) * inv_temp as f64).exp())
        .sum();
    let gz = got
        .sum_exp
        .ok_or_else(|| format!("{op}: no normaliser returned"))?;
    compare(
        op,
        format!("n={n} k={k} (normaliser)"),
        bounds::SUM_EXP,
        &[z],
        &[gz as f32],
    )
}

/// Top-k and the normaliser over the logits as a grammar's mask and the repetition penalty
/// leave them (sampling on the device in every mode): masks dense and sparse (fewer allowed
/// tokens than `k` on some seeds), bits set past `n` in the last word (ignored), `n` off the
/// 32-bit word and multi-stage, ties on half-integer levels, penalty 2 (exact on every
/// backend) on positive and negative logits; then the penalty alone, without a mask.
pub async fn select_filtered<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "select_filtered";
    let mut rng = Pcg32::new(seed);
    let mut n = if seed.is_multiple_of(2) {
        rng.range(33, 4000)
    } else {
        rng.range(4097, 60000)
    };
    if n.is_multiple_of(32) {
        n += 1;
    }
    let k = rng.range(1, 64.min(n));
    let x: Vec<f32> = (0..n).map(|_| (rng.normal() * 4.0).round() / 2.0).collect();
    let words = n.div_ceil(32);
    let density = [0.5f32, 0.01, 0.0005][(seed % 3) as usize];
    let mut bits = |p: f32| -> Vec<u32> {
        (0..words)
            .map(|_| (0..32).fold(0u32, |w, i| w | ((rng.next_f32() < p) as u32) << i))
            .collect()
    };
    let mut allowed = bits(density);
    let seen = bits(0.05);
    allowed[words - 1] |= !0u32 << (n % 32); // past n: never a candidate
    let one = rng.range(0, n - 1);
    allowed[one / 32] |= 1 << (one % 32);
    let inv_temp = 1.0 / rng.uniform(0.3, 1.5);
    let xd = b.upload("logits", &x).map_err(e(op))?;
    let has = |w: &[u32], i: usize| w[i / 32] >> (i % 32) & 1 == 1;
    let mut said = Vec::new();
    for masked in [true, false] {
        let filter = lorekeeper_engine::LogitFilter {
            allowed: masked.then_some(&allowed[..]),
            penalized: Some(&seen),
            penalty: 2.0,
        };
        let got = b
            .select_filtered(&xd, n, k, Some(inv_temp), &filter)
            .await
            .map_err(e(op))?;
        // Oracle: the allowed tokens' penalized logits, stable sort descending.
        let kept: Vec<(u32, f32)> = (0..n)
            .filter(|&i| !masked || has(&allowed, i))
            .map(|i| {
                let v = x[i];
                let v = match has(&seen, i) {
                    true if v > 0.0 => v / 2.0,
                    true => v * 2.0,
                    false => v,
                };
                (i as u32, v)
            })
            .collect();
        let mut want = kept.clone();
        want.sort_by(|a, c| c.1.total_cmp(&a.1).then(a.0.cmp(&c.0)));
        want.truncate(k);
        let what = format!("n={n} k={k} masked={masked} allowed={}", kept.len());
        if got.top != want {
            let at = got
                .top
                .iter()
                .zip(&want)
                .position(|(g, w)| g != w)
                .unwrap_or(got.top.len().min(want.len()));
            return Err(format!(
                "{op} {what}: top-k differs at rank {at}: got {:?}, want {:?} ({} vs {} candidates)",
                got.top.get(at),
                want.get(at),
                got.top.len(),
                want.len()
            ));
        }
        let mx = want[0].1 as f64;
        let z: f64 = kept
            .iter()
            .map(|&(_, v)| ((v as f64 - mx) * inv_temp as f64).exp())
            .sum();
        let gz = got
            .sum_exp
            .ok_or_else(|| format!("{op}: no normaliser returned"))?;
        said.push(compare(
            op,
            format!("{what} (normaliser)"),
            bounds::SUM_EXP,
            &[z],
            &[gz as f32],
        )?);
    }
    Ok(said.join("; "))
}

/// A matrix stored as LQ4 row blocks (a matrix over one binding's limit): every block's GEMV
/// and GEMM written into its window of the full output, and the embedding gathered block by
/// block, equal the whole matrix's oracle.
pub async fn q4_blocks<B: Backend>(b: &B, seed: u64) -> Check {
    let op = "q4_blocks";
    let mut rng = Pcg32::new(seed);
    let (n, k, m, tokens) = (
        rng.range(3, 150),
        32 * rng.range(1, 9),
        rng.range(1, 40),
        rng.range(1, 9),
    );
    // One layout per seed, in turn; the other ops test every layout every time.
    let scales = LAYOUTS[seed as usize % LAYOUTS.len()];
    let w = random_q4_as(&mut rng, scales, n, k);
    // Random cut points: 2 or 3 blocks of uneven size.
    let c1 = rng.range(1, n - 1);
    let c2 = rng.range(c1, n);
    let cuts: Vec<(usize, usize)> = [(0, c1), (c1, c2), (c2, n)]
        .into_iter()
        .filter(|(a, z)| z > a)
        .collect();
    let blocks = cuts
        .iter()
        .map(|&(a, z)| Ok((a, b.upload_q4("block", &w.row_block(a, z))?)))
        .collect::<lorekeeper_engine::Result<Vec<_>>>()
        .map_err(e(op))?;
    let x = rng.normal_vec(m * k, 1.0);
    let xd = b.upload("x", &x).map_err(e(op))?;
    for kernel in [MatmulKernel::Gemv, MatmulKernel::Gemm] {
        let od = b.alloc("out", m * n).map_err(e(op))?;
        for (r0, q) in &blocks {
            b.q4_matmul_block(&xd, q, &od, m, kernel, n, *r0)
                .map_err(e(op))?;
        }
        let got = b.read(&od, 0, m * n).await.map_err(e(op))?;
        compare(
            op,
            format!(
                "{} {kernel:?} m={m} n={n} k={k} blocks={cuts:?}",
                w.layout_name()
            ),
            bounds::Q4_MATMUL,
            &q4_oracle(b, &x, &w, m),
            &got,
        )?;
    }
    let ids: Vec<u32> = (0..tokens).map(|_| rng.range(0, n - 1) as u32).collect();
    let od = b.alloc("emb", tokens * k).map_err(e(op))?;
    for (r0, q) in &blocks {
        b.embed_q4_block(&ids, q, *r0, &od).map_err(e(op))?;
    }
    let got = b.read(&od, 0, tokens * k).await.map_err(e(op))?;
    let w = &*as_run(b, &w);
    let want: Vec<f64> = ids
        .iter()
        .flat_map(|&id| (0..k).map(move |c| (id as usize, c)))
        .map(|(id, c)| oracle::q4_weight(w, id, c))
        .collect();
    compare(
        op,
        format!("embed n={n} k={k} tokens={tokens} blocks={cuts:?}"),
        bounds::EMBED,
        &want,
        &got,
    )
}

/// Bad calls come back as errors, never panics, and name the op.
pub async fn rejects_bad_shapes<B: Backend>(b: &B) -> Check {
    let op = "errors";
    let mut rng = Pcg32::new(9);
    let w = random_q4(&mut rng, 8, 64);
    let wd = b.upload_q4("w", &w).map_err(e(op))?;
    let small = b.alloc("small", 10).map_err(e(op))?;
    let out = b.alloc("out", 8).map_err(e(op))?;
    let mut failures = Vec::new();
    let mut expect = |name: &str, r: lorekeeper_engine::Result<()>, needle: &str| match r {
        Ok(()) => failures.push(format!("{name}: accepted")),
        Err(err) if !err.to_string().contains(needle) => {
            failures.push(format!("{name}: message '{err}' lacks '{needle}'"))
        }
        Err(_) => {}
    };
    expect(
        "short x",
        b.q4_matmul(&small, &wd, &out, 1, MatmulKernel::Gemv),
        "q4_matmul",
    );
    expect("alias", b.add_assign(&out, &out, 8), "also an input");
    expect("bad id", b.embed_q4(&[8], &wd, &out), "token id 8");
    expect(
        "block window",
        b.q4_matmul_block(&small, &wd, &out, 1, MatmulKernel::Gemv, 8, 4),
        "exceed the output stride",
    );
    let s = AttnShape {
        tokens: 2,
        heads: 3,
        kv_heads: 2,
        head_dim: 4,
        pos0: 0,
        ctx: 4,
        scale: 1.0,
        causal: true,
    };
    expect(
        "gqa",
        b.attention(&small, &small, &small, &out, s),
        "not a multiple",
    );
    let sel = b.select(&out, 8, 0, None).await.map(|_| ());
    expect("k=0", sel, "k = 0");
    // RoPE with the KV append past the end of a one-position cache (head_dim 4: the GPU's
    // one-dispatch form; position 1, where the rotation moves every value), and with a table
    // too short for the position.
    let rope = |pos0| RopeShape {
        tokens: 1,
        heads: 1,
        head_dim: 4,
        rot_dim: 4,
        pos0,
    };
    let (q, k, v) = (
        b.upload("q", &[1.0, 2.0, 3.0, 4.0]).map_err(e(op))?,
        b.upload("k", &[4.0, 3.0, 2.0, 1.0]).map_err(e(op))?,
        b.alloc("v", 4).map_err(e(op))?,
    );
    let table = b.upload("table", &rope_table(1e4, 4, 2)).map_err(e(op))?;
    let kc = b.alloc_kv("k cache", 4, b.kv_format()).map_err(e(op))?;
    let vc = b.alloc_kv("v cache", 4, b.kv_format()).map_err(e(op))?;
    let ([q, k, v], [kc, vc]) = ([&q, &k, &v], [&kc, &vc]);
    let shapes = [rope(1), rope(1)];
    let past_end = b.rope_append([q, k, v], &table, shapes, [kc, vc], 4);
    expect(
        "append past the cache",
        past_end,
        "destination holds 4 elements, needs 8",
    );
    let late = [rope(2), rope(2)];
    let short_table = b.rope_append([q, k, v], &table, late, [kc, vc], 0);
    expect(
        "rope table too short",
        short_table,
        "table for positions up to 3",
    );
    // A refused call changes nothing: the rotation is not half done.
    for (name, x, was) in [
        ("q", q, [1.0, 2.0, 3.0, 4.0]),
        ("k", k, [4.0, 3.0, 2.0, 1.0]),
    ] {
        let now = b.read(x, 0, 4).await.map_err(e(op))?;
        if now != was {
            failures.push(format!("refused rope_append changed {name}: {now:?}"));
        }
    }
    if failures.is_empty() {
        Ok("errors: 7 bad calls rejected with named errors".into())
    } else {
        Err(failures.join("; "))
    }
}
