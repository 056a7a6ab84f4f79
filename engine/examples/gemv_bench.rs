//! The CPU's decode GEMV by layout against a plain read of the same bytes, in one process:
//! twelve `[5632, 2048]` matrices of random GGUF Q4_K, Q6_K and Q5_0 blocks (66–208 MB, past
//! the caches) as `lq4k`, `lq4h` (the same values rounded to f16 group scales), `q6_k`, `q5`
//! and `q8_0` (the same Q5_0 values), each multiplied in turn by one activation row, the
//! layouts alternated nine times; medians per GEMV, the bandwidth they reach and the
//! weights a second they multiply.
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
    let (mut q5, mut q8) = (Vec::new(), Vec::new());
    for _ in 0..MATRICES {
        let (m, m6) = common::random_k_quants(&mut bytes, ROWS, COLS)?;
        h.push(m.lq4k_to_lq4h("q4_k")?);
        k.push(m);
        q6.push(m6);
        let m5 = common::random_q5_0(&mut bytes, ROWS, COLS)?;
        q8.push(m5.to_portable("q5_0")?.into_owned());
        q5.push(m5);
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
    let mut times = vec![Vec::new(); 6];
    pool::with_max_threads(threads, || {
        for _ in 0..9 {
            times[0].push(read(&k));
            times[1].push(gemv(&k));
            times[2].push(gemv(&h));
            times[3].push(gemv(&q6));
            times[4].push(gemv(&q5));
            times[5].push(gemv(&q8));
        }
    });
    let bytes = |m: &Q4Matrix| (m.data.len() * 4) as f64;
    let sizes = [&k[0], &k[0], &h[0], &q6[0], &q5[0], &q8[0]].map(bytes);
    println!("[{ROWS}, {COLS}] × {MATRICES}, {threads} threads, medians of 9:");
    let names = [
        "read (lq4k bytes)",
        "lq4k",
        "lq4h",
        "q6_k",
        "q5",
        "q8_0 (Q5_0)",
    ];
    for ((name, t), size) in names.iter().zip(&mut times).zip(sizes) {
        t.sort_by(f64::total_cmp);
        let ms = t[t.len() / 2];
        let weights = (ROWS * COLS) as f64 / ms / 1e6;
        println!(
            "  {name:18} {ms:.3} ms  {:.1} GB/s  {weights:.1} G weights/s",
            size / ms / 1e6
        );
    }
    Ok(())
}
