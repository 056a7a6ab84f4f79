//! What the CPU benchmarks share: matrices of random GGUF blocks.
use lorekeeper_engine::Q4Matrix;

/// Random bytes from a fixed seed (xorshift64).
pub struct Bytes(u64);

impl Default for Bytes {
    fn default() -> Self {
        Bytes(0x2545_f491_4f6c_dd1d)
    }
}

impl Bytes {
    fn byte(&mut self) -> u8 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as u8
    }

    fn vec(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// A `[rows, cols]` matrix of random Q4_K blocks (`lq4k`) and one of random Q6_K blocks, every
/// super-block's scales 0.001 (`cols` a multiple of 256).
pub fn random_k_quants(
    bytes: &mut Bytes,
    rows: usize,
    cols: usize,
) -> Result<(Q4Matrix, Q4Matrix), Box<dyn std::error::Error>> {
    let d = half::f16::from_f32(0.001).to_bits().to_le_bytes();
    let blocks = rows * cols / 256;
    let mut raw = bytes.vec(blocks * 144);
    for b in raw.chunks_exact_mut(144) {
        b[..2].copy_from_slice(&d);
        b[2..4].copy_from_slice(&d);
    }
    let k = Q4Matrix::from_ggml_q4_k("q4_k", rows, cols, &raw)?;
    let mut raw = bytes.vec(blocks * 210);
    for b in raw.chunks_exact_mut(210) {
        b[208..].copy_from_slice(&d);
    }
    let q6 = Q4Matrix::from_ggml_q6_k("q6_k", rows, cols, &raw)?;
    Ok((k, q6))
}

/// A `[rows, cols]` matrix of random Q5_0 blocks (scale 0.001), as the engine imports them:
/// `q5` rows (llama.cpp's "Q4_K_M" of a model whose rows are not multiples of 256 is mostly
/// Q5_0).
pub fn random_q5_0(
    bytes: &mut Bytes,
    rows: usize,
    cols: usize,
) -> Result<Q4Matrix, Box<dyn std::error::Error>> {
    let d = half::f16::from_f32(0.001).to_bits().to_le_bytes();
    let mut raw = bytes.vec(rows * cols / 32 * 22);
    for b in raw.chunks_exact_mut(22) {
        b[..2].copy_from_slice(&d);
    }
    Ok(Q4Matrix::from_ggml_q5("q5_0", rows, cols, &raw, false)?)
}
