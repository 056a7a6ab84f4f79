//! Grouped-query attention over the KV cache: causal (decode and prefill) or bidirectional
//! (encoders). Decode splits (token, KV head, key range) tasks across the pool and merges the
//! partial softmaxes; prefill runs two packed SGEMMs per (head, block of query rows). The
//! cache is f32 or f16 ([`KvElem`]): decode converts each f16 row as it reads it (F16C on
//! x86-64), prefill widens the visible rows once for its SGEMMs.

use std::borrow::Cow;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::backend::AttnShape;

/// Query rows per task of the blocked path.
const QBLOCK: usize = 64;

/// Plain-Rust reference: per (query, head) two-pass softmax for a few query rows (decode);
/// from `GEMM_MIN_ROWS` rows (prefill, encoders) per (head, block of query rows)
/// as two packed SGEMMs around a row softmax.
pub fn attention<E: KvElem>(q: &[f32], k: &[E], v: &[E], out: &mut [f32], s: AttnShape) {
    if s.tokens >= super::math::GEMM_MIN_ROWS && s.head_dim > 0 {
        let seen = ((s.pos0 + s.tokens) * s.kv_heads * s.head_dim).min(k.len().min(v.len()));
        return blocked(q, &E::widen(&k[..seen]), &E::widen(&v[..seen]), out, s);
    }
    // Decode: one task per (token, KV head, key range). The query heads that share a KV head
    // (GQA) read its keys and values once, together, and the keys are split in ranges so every
    // thread reads the cache at once (decode attention is bound by reading it); the ranges'
    // partial softmax results are merged after.
    let d = s.head_dim;
    let group = (s.heads / s.kv_heads.max(1)).max(1);
    let pairs = s.tokens * s.kv_heads;
    let want = (2 * super::pool::threads()).div_ceil(pairs.max(1));
    let splits = want
        .min((s.pos0 + s.tokens).div_ceil(MIN_SPLIT_KEYS))
        .max(1);
    // Per (pair, split), per head of the group: the unnormalized output `Σ p·v` (d), the
    // range's max score and `Σ p`.
    let stride = group * (d + 2);
    let mut part = vec![0f32; pairs * splits * stride];
    let pb = super::math::OutPtr(part.as_mut_ptr());
    super::pool::for_ranges(pairs * splits, 1, |i0, i1| {
        let p = pb;
        for i in i0..i1 {
            let (pair, sp) = (i / splits, i % splits);
            let (t, kvh) = (pair / s.kv_heads, pair % s.kv_heads);
            let n_keys = visible_keys(s, t);
            let chunk = n_keys.div_ceil(splits);
            let keys = ((sp * chunk).min(n_keys), ((sp + 1) * chunk).min(n_keys));
            // SAFETY: task i owns part[i·stride..(i+1)·stride], inside `part`; ranges of
            // different tasks are disjoint.
            let dst = unsafe { std::slice::from_raw_parts_mut(p.0.add(i * stride), stride) };
            attend_part(q, k, v, dst, s, (t, kvh), keys);
        }
    });
    let out = &mut out[..s.tokens * s.heads * d];
    for pair in 0..pairs {
        let (t, kvh) = (pair / s.kv_heads, pair % s.kv_heads);
        let parts = &part[pair * splits * stride..][..splits * stride];
        for g in 0..group {
            let at = |sp: usize| &parts[sp * stride + g * (d + 2)..][..d + 2];
            let mx = (0..splits)
                .filter(|&sp| at(sp)[d + 1] > 0.0)
                .map(|sp| at(sp)[d])
                .fold(f32::NEG_INFINITY, f32::max);
            let o = &mut out[(t * s.heads + kvh * group + g) * d..][..d];
            o.fill(0.0);
            let mut l = 0f32;
            for sp in 0..splits {
                let r = at(sp);
                if r[d + 1] <= 0.0 {
                    continue;
                }
                let w = (r[d] - mx).exp();
                l += w * r[d + 1];
                for (oi, &x) in o.iter_mut().zip(&r[..d]) {
                    *oi += w * x;
                }
            }
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            o.iter_mut().for_each(|x| *x *= inv);
        }
    }
}

/// Keys at least per range of the decode path's split.
const MIN_SPLIT_KEYS: usize = 128;

/// Keys query token `t` sees.
fn visible_keys(s: AttnShape, t: usize) -> usize {
    if s.causal {
        s.pos0 + t + 1
    } else {
        s.pos0 + s.tokens
    }
}

/// A KV cache value: f32, or f16 converted as it is read.
pub trait KvElem: Copy + Send + Sync {
    /// `src` as f32: itself, or converted into `buf` (with F16C where `hw`; the caller must
    /// then run on a CPU with F16C, see [`super::simd::Isa::f16c`]).
    fn row<'a>(src: &'a [Self], buf: &'a mut [f32], hw: bool) -> &'a [f32];
    /// `src` as f32 (the blocked path's SGEMMs read f32).
    fn widen(src: &[Self]) -> Cow<'_, [f32]>;
}

impl KvElem for f32 {
    #[inline(always)]
    fn row<'a>(src: &'a [f32], _buf: &'a mut [f32], _hw: bool) -> &'a [f32] {
        src
    }
    fn widen(src: &[f32]) -> Cow<'_, [f32]> {
        Cow::Borrowed(src)
    }
}

impl KvElem for f16 {
    #[inline(always)]
    fn row<'a>(src: &'a [f16], buf: &'a mut [f32], hw: bool) -> &'a [f32] {
        let buf = &mut buf[..src.len()];
        #[cfg(target_arch = "x86_64")]
        if hw {
            // SAFETY: `hw` is set only where F16C was detected (the trait's contract).
            unsafe { f16c_row(src, buf) };
            return buf;
        }
        let _ = hw;
        for (o, &x) in buf.iter_mut().zip(src) {
            *o = x.to_f32();
        }
        buf
    }
    fn widen(src: &[f16]) -> Cow<'_, [f32]> {
        let mut out = vec![0f32; src.len()];
        src.convert_to_f32_slice(&mut out);
        Cow::Owned(out)
    }
}

/// Eight halves at a time with `vcvtph2ps`; inlined into the AVX2 + F16C decode body.
///
/// # Safety
/// The CPU must support F16C; `dst` is at least as long as `src`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn f16c_row(src: &[f16], dst: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    let n8 = src.len() / 8 * 8;
    for i in (0..n8).step_by(8) {
        // SAFETY: i + 8 <= n8 <= src.len() <= dst.len(); unaligned loads and stores.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
    }
    for i in n8..src.len() {
        dst[i] = src[i].to_f32();
    }
}

/// Keys `j0..j1` for the query heads of token `t` that share KV head `kvh`
/// (`group = heads / kv_heads`), into `dst` (`[group, head_dim + 2]`: per head the
/// unnormalized `Σ_j p_j·v_j` with `p_j = exp(score_j − m)`, then `m` = the range's max score,
/// then `Σ_j p_j`; an empty range gives zeros and `m = −∞`). Each key and value row is read
/// once for the whole group.
fn attend_part<E: KvElem>(
    q: &[f32],
    k: &[E],
    v: &[E],
    dst: &mut [f32],
    s: AttnShape,
    at: (usize, usize),
    keys: (usize, usize),
) {
    #[cfg(target_arch = "x86_64")]
    if super::simd::Isa::f16c() {
        // SAFETY: `Isa::f16c()` holds only where AVX2, FMA and F16C were detected.
        return unsafe { attend_part_avx2(q, k, v, dst, s, at, keys) };
    }
    attend_part_body(q, k, v, dst, s, at, keys, false)
}

/// [`attend_part_body`] compiled for AVX2 + FMA + F16C (the baseline x86-64 build has only
/// SSE2).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_part_avx2<E: KvElem>(
    q: &[f32],
    k: &[E],
    v: &[E],
    dst: &mut [f32],
    s: AttnShape,
    at: (usize, usize),
    keys: (usize, usize),
) {
    attend_part_body(q, k, v, dst, s, at, keys, true)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_part_body<E: KvElem>(
    q: &[f32],
    k: &[E],
    v: &[E],
    dst: &mut [f32],
    s: AttnShape,
    (t, kvh): (usize, usize),
    (j0, j1): (usize, usize),
    hw: bool,
) {
    let d = s.head_dim;
    let group = (s.heads / s.kv_heads.max(1)).max(1);
    let n = j1 - j0;
    dst.fill(0.0);
    if n == 0 {
        for g in 0..group {
            dst[g * (d + 2) + d] = f32::NEG_INFINITY;
        }
        return;
    }
    let q0 = (t * s.heads + kvh * group) * d;
    let qs = &q[q0..q0 + group * d];
    // One converted row (f16 caches), at most 256 values (the shape check's head_dim bound).
    let mut buf = [0f32; 256];
    // scores[g·n + (j − j0)]
    let mut scores = vec![0f32; group * n];
    for j in j0..j1 {
        let kr = E::row(&k[(j * s.kv_heads + kvh) * d..][..d], &mut buf, hw);
        for (g, qr) in qs.chunks_exact(d).enumerate() {
            scores[g * n + j - j0] = super::math::dot(qr, kr) * s.scale;
        }
    }
    for (g, row) in scores.chunks_exact_mut(n).enumerate() {
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        row.iter_mut()
            .for_each(|x| *x = super::math::fast_exp(*x - mx));
        dst[g * (d + 2) + d] = mx;
        dst[g * (d + 2) + d + 1] = super::math::sum(row);
    }
    for j in j0..j1 {
        let vr = E::row(&v[(j * s.kv_heads + kvh) * d..][..d], &mut buf, hw);
        for (g, og) in dst.chunks_exact_mut(d + 2).enumerate() {
            let p = scores[g * n + j - j0];
            for (oi, &vi) in og[..d].iter_mut().zip(vr) {
                *oi += p * vi;
            }
        }
    }
}

/// `x ← fast_exp(x − mx)` over a prefill softmax row, compiled for AVX2 where
/// [`super::simd::Isa::f16c`] holds (as [`attend_part`]; the baseline x86-64 build has four
/// lanes): the same bits either way, since the compiler contracts nothing.
fn exp_shifted(xs: &mut [f32], mx: f32) {
    #[cfg(target_arch = "x86_64")]
    if super::simd::Isa::f16c() {
        // SAFETY: `Isa::f16c()` holds only where AVX2, FMA and F16C were detected.
        return unsafe { exp_shifted_avx2(xs, mx) };
    }
    exp_shifted_body(xs, mx);
}

/// [`exp_shifted`] compiled for AVX2 + FMA + F16C.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn exp_shifted_avx2(xs: &mut [f32], mx: f32) {
    exp_shifted_body(xs, mx);
}

#[inline(always)]
fn exp_shifted_body(xs: &mut [f32], mx: f32) {
    xs.iter_mut()
        .for_each(|x| *x = super::math::fast_exp(*x - mx));
}

/// Attention by blocks: for head `h` and query rows `t0..t1`,
/// `S = scale · Q[t0..t1, h] K[0..n, kvh]ᵀ` (`[rows, n]`, `n` = keys the last row sees), a
/// softmax over each row's visible keys (the rest zeroed), `O[t0..t1, h] = P V[0..n, kvh]`.
fn blocked(q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], s: AttnShape) {
    let d = s.head_dim;
    let (qs, kvs) = (s.heads * d, s.kv_heads * d);
    let group = (s.heads / s.kv_heads.max(1)).max(1);
    let blocks = s.tokens.div_ceil(QBLOCK);
    let out = &mut out[..s.tokens * s.heads * d];
    let base = super::math::OutPtr(out.as_mut_ptr());
    let task = |i: usize| {
        let (h, bi) = (i / blocks, i % blocks);
        let (t0, t1) = (bi * QBLOCK, ((bi + 1) * QBLOCK).min(s.tokens));
        let (rows, kvh) = (t1 - t0, h / group);
        let n = s.pos0 + if s.causal { t1 } else { s.tokens };
        let mut p = vec![0f32; rows * n];
        let o = base;
        // SAFETY (both calls): A, B and C address `rows x d` queries (row stride heads·d),
        // `n` keys / values of head kvh (row stride kv_heads·d) — all inside the buffers the
        // shape check admitted — and the `rows x n` scratch. C of the second call is rows
        // t0..t1 of head h of `out`, which no other task writes.
        unsafe {
            super::math::sgemm_nt(
                (rows, d, n),
                s.scale,
                (q.as_ptr().add((t0 * s.heads + h) * d), qs),
                (k.as_ptr().add(kvh * d), kvs),
                (p.as_mut_ptr(), n),
            );
        }
        for (r, row) in p.chunks_mut(n).enumerate() {
            let seen = if s.causal { s.pos0 + t0 + r + 1 } else { n };
            let (live, dead) = row.split_at_mut(seen);
            let mx = live.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            // (exponentials in their own loop and an eight-lane sum: both vectorize)
            exp_shifted(live, mx);
            let inv = 1.0 / super::math::sum(live);
            live.iter_mut().for_each(|x| *x *= inv);
            dead.fill(0.0);
        }
        unsafe {
            matrixmultiply::sgemm(
                rows,
                n,
                d,
                1.0,
                p.as_ptr(),
                n as isize,
                1,
                v.as_ptr().add(kvh * d),
                kvs as isize,
                1,
                0.0,
                o.0.add((t0 * s.heads + h) * d),
                qs as isize,
                1,
            );
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        (0..s.heads * blocks).into_par_iter().for_each(task);
    }
    #[cfg(target_arch = "wasm32")]
    super::pool::for_ranges(s.heads * blocks, 1, |i0, i1| (i0..i1).for_each(&task));
}
