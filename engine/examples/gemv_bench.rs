//! The CPU's decode GEMV by layout against a plain read of the same bytes, in one process:
//! twelve `[5632, 2048]` matrices of random GGUF Q4_K and Q6_K blocks (66–121 MB, past the
//! caches) as `lq4k`, `lq4h` (the same values rounded to f16 group scales) and `q6_k`, each
//! multiplied in turn by one activation row, the layouts alternated nine times; medians per
//! GEMV and the bandwidth they reach.
//! `cargo run --release -p lorekeeper-engine --example gemv_bench [-- THREADS]` (default 2).
use std::time::Instant;

mod common;

use lorekeeper_engine::cpu::gemv::q4_gemv_q8;
use lorekeeper_engine::cpu::pool;
use lorekeeper_engine::Q4Matrix;

const ROWS: usize = 5632;
const COLS: usize = 2048;
const MATRICES: usize = 12;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: usize = std::env::args().nth(1).map_or(Ok(2), |t| t.parse())?;
    let mut bytes = common::Bytes::default();
    let (mut k, mut h, mut q6) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..MATRICES {
        let (m, m6) = common::random_k_quants(&mut bytes, ROWS, COLS)?;
        h.push(m.lq4k_to_lq4h("q4_k")?);
        k.push(m);
        q6.push(m6);
    }
    let x: Vec<f32> = (0..COLS).map(|i| (i % 17) as f32 / 8.0 - 1.0).collect();
    let mut out = vec![0f32; ROWS];
    // Milliseconds per GEMV over the twelve matrices.
    let mut gemv = |ms: &[Q4Matrix]| {
        let t = Instant::now();
        for m in ms {
            q4_gemv_q8(&x, m, 1, &mut out, ROWS, 0);
        }
        t.elapsed().as_secs_f64() * 1e3 / ms.len() as f64
    };
    // Milliseconds to read the lq4k matrices' words once, split over the threads.
    let read = |ms: &[Q4Matrix]| {
        let t = Instant::now();
        let per = ms.len().div_ceil(threads);
        let sum: u32 = std::thread::scope(|s| {
            let parts: Vec<_> = ms
                .chunks(per)
                .map(|part| {
                    s.spawn(move || {
                        let mut acc = [0u32; 16];
                        for m in part {
                            for c in m.data.chunks_exact(16) {
                                for (a, &v) in acc.iter_mut().zip(c) {
                                    *a ^= v;
                                }
                            }
                        }
                        acc.iter().fold(0, |a, &v| a ^ v)
                    })
                })
                .collect();
            parts
                .into_iter()
                .map(|p| p.join().unwrap_or(0))
                .fold(0, |a, v| a ^ v)
        });
        std::hint::black_box(sum);
        t.elapsed().as_secs_f64() * 1e3 / ms.len() as f64
    };
    let mut times = vec![Vec::new(); 4];
    pool::with_max_threads(threads, || {
        for _ in 0..9 {
            times[0].push(read(&k));
            times[1].push(gemv(&k));
            times[2].push(gemv(&h));
            times[3].push(gemv(&q6));
        }
    });
    let bytes = |m: &Q4Matrix| (m.data.len() * 4) as f64;
    let sizes = [bytes(&k[0]), bytes(&k[0]), bytes(&h[0]), bytes(&q6[0])];
    println!("[{ROWS}, {COLS}] × {MATRICES}, {threads} threads, medians of 9:");
    for ((name, t), size) in ["read (lq4k bytes)", "lq4k", "lq4h", "q6_k"]
        .iter()
        .zip(&mut times)
        .zip(sizes)
    {
        t.sort_by(f64::total_cmp);
        let ms = t[t.len() / 2];
        println!("  {name:18} {ms:.3} ms  {:.1} GB/s", size / ms / 1e6);
    }
    Ok(())
}
