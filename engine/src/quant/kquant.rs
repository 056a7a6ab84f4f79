//! Byte-level readers and writers of the k-quant layouts (`lq4k`, `q6_k`; see [`super`]).

/// Group `g`'s `(d, dmin, sc, mn)` in an `lq4k` row's scale bytes: its super-block's record
/// (from byte `20·(g / 8)`: f16 `d`, f16 `dmin`, then `(sc, mn)` byte pairs of its groups).
#[inline]
pub fn lq4k_scales(row: &[u8], g: usize) -> (f32, f32, u8, u8) {
    let at = 20 * (g / 8);
    let h = |i: usize| half::f16::from_bits(u16::from_le_bytes([row[i], row[i + 1]])).to_f32();
    let p = at + 4 + 2 * (g % 8);
    (h(at), h(at + 2), row[p], row[p + 1])
}

/// The stored 6-bit code (0..=63) of weight `i` of group `g` in a `q6_k` row's code bytes
/// (`codes`: 24·`groups` bytes; the pairing is documented at module level).
#[inline]
pub fn q6_code(codes: &[u8], groups: usize, g: usize, i: usize) -> u8 {
    if g / 2 * 2 + 1 < groups {
        let (base, b) = (48 * (g / 2), g % 2);
        let lo = (codes[base + i] >> (4 * b)) & 0xF;
        let hi = (codes[base + 32 + i % 16] >> (4 * b + 2 * (i / 16))) & 3;
        lo | hi << 4
    } else {
        let base = 24 * g;
        let lo = (codes[base + i % 16] >> (4 * (i / 16))) & 0xF;
        let hi = (codes[base + 16 + i % 8] >> (2 * (i / 8))) & 3;
        lo | hi << 4
    }
}

/// Writes the 6-bit code `q` of weight `i` of group `g` into `q6_k` row code bytes (zeroed
/// before the first call), the inverse of [`q6_code`].
pub fn q6_put(codes: &mut [u8], groups: usize, g: usize, i: usize, q: u8) {
    let (lo, hi) = (q & 0xF, (q >> 4) & 3);
    if g / 2 * 2 + 1 < groups {
        let (base, b) = (48 * (g / 2), g % 2);
        codes[base + i] |= lo << (4 * b);
        codes[base + 32 + i % 16] |= hi << (4 * b + 2 * (i / 16));
    } else {
        let base = 24 * g;
        codes[base + i % 16] |= lo << (4 * (i / 16));
        codes[base + 16 + i % 8] |= hi << (2 * (i / 8));
    }
}
