//! The CPU's prefill GEMM by layout: one `[5632, COLS]` matrix of random GGUF Q4_K, Q6_K and
//! Q5_0 blocks as `lq4k`, `lq4h`, `q6_k`, `q5` and `q8_0`, times ROWS activation rows, the layouts
//! alternated 15 times; the best and the median GEMM and the multiply-adds per second they
//! reach (this host's speed drifts: alternate builds run by run and compare the best).
//! `cargo run --release -p lorekeeper-engine --example gemm_bench [-- THREADS [ROWS [COLS]]]`
//! (defaults 2, 256, 2048).
use std::time::Instant;

mod common;

use lorekeeper_engine::cpu::gemv::q4_gemv_q8;
use lorekeeper_engine::cpu::pool;
use lorekeeper_engine::Q4Matrix;

const ROWS: usize = 5632;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: usize = std::env::args().nth(1).map_or(Ok(2), |t| t.parse())?;
    let m: usize = std::env::args().nth(2).map_or(Ok(256), |t| t.parse())?;
    let cols: usize = std::env::args().nth(3).map_or(Ok(2048), |t| t.parse())?;
    let (k, q6) = common::random_k_quants(&mut common::Bytes::default(), ROWS, cols)?;
    let h = k.lq4k_to_lq4h("q4_k")?;
    let q5 = common::random_q5_0(&mut common::Bytes::default(), ROWS, cols)?;
    let q8 = q5.to_portable("q5_0")?.into_owned();
    let x: Vec<f32> = (0..cols * m).map(|i| (i % 17) as f32 / 8.0 - 1.0).collect();
    let mut out = vec![0f32; ROWS * m];
    let mut gemm = |w: &Q4Matrix| {
        let t = Instant::now();
        q4_gemv_q8(&x, w, m, &mut out, ROWS, 0);
        t.elapsed().as_secs_f64() * 1e3
    };
    let mut times = vec![Vec::new(); 5];
    pool::with_max_threads(threads, || {
        for _ in 0..15 {
            times[0].push(gemm(&k));
            times[1].push(gemm(&h));
            times[2].push(gemm(&q6));
            times[3].push(gemm(&q5));
            times[4].push(gemm(&q8));
        }
    });
    println!("[{ROWS}, {cols}] × {m} rows, {threads} threads, best and median of 15:");
    for (name, t) in ["lq4k", "lq4h", "q6_k", "q5", "q8_0"]
        .iter()
        .zip(&mut times)
    {
        t.sort_by(f64::total_cmp);
        let (best, ms) = (t[0], t[t.len() / 2]);
        let macs = (ROWS * cols * m) as f64;
        println!(
            "  {name:6} {best:.3} / {ms:.3} ms  {:.1} / {:.1} GMAC/s",
            macs / best / 1e6,
            macs / ms / 1e6
        );
    }
    Ok(())
}
