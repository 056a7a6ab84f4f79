//! Byte-level readers and writers of the k-quant and 5-bit layouts (`lq4k`, `q6_k`, `q5`; see
//! [`super`]).

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

/// Where the fifth bit of weight `i` of group `g` lies in a `q5` row's fifth-bit bytes (the
/// `4·groups` bytes after its nibbles): the byte offset of its little-endian word and the bit.
#[inline]
fn q5_bit_at(groups: usize, g: usize, i: usize) -> (usize, usize) {
    if g / 2 * 2 + 1 < groups {
        (8 * (g / 2) + 4 * (i % 2), 16 * (g % 2) + i / 2)
    } else {
        (4 * g, 16 * (i % 2) + i / 2)
    }
}

/// The 5-bit code (0..=31) of weight `i` of group `g` in a `q5` row's code bytes (`codes`:
/// 20·`groups` bytes; the layout is documented at module level).
#[inline]
pub fn q5_code(codes: &[u8], groups: usize, g: usize, i: usize) -> u8 {
    let lo = (codes[16 * g + i / 2] >> (4 * (i % 2))) & 0xF;
    let (at, bit) = q5_bit_at(groups, g, i);
    let hb = codes[16 * groups + at + bit / 8] >> (bit % 8) & 1;
    lo | hb << 4
}

/// Writes the 5-bit code `q` of weight `i` of group `g` into `q5` row code bytes (zeroed
/// before the first call), the inverse of [`q5_code`].
pub fn q5_put(codes: &mut [u8], groups: usize, g: usize, i: usize, q: u8) {
    codes[16 * g + i / 2] |= (q & 0xF) << (4 * (i % 2));
    let (at, bit) = q5_bit_at(groups, g, i);
    codes[16 * groups + at + bit / 8] |= (q >> 4 & 1) << (bit % 8);
}
