// Embedding gather from a 4-bit (LQ4, lq4h) or 8-bit (q8_0) table: out[t][k] = dequant(W[ids[t]][k]).
// One thread per output element (2-D grid). Prelude: common.wgsl.

struct Params {
    tokens: u32,
    rows: u32,       // vocabulary rows in the table (a row block of the vocabulary)
    cols: u32,       // embedding width, multiple of 32
    sm_off: u32,
    rows_off: u32,
    row0: u32,       // vocabulary id of the table's first row
    kind: u32,       // 0: LQ4; 1: lq4h, 2: q8_0 (one f16 (s, m) word per group at sm_off, no row section)
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;          // LQ4 words of the table
@group(0) @binding(2) var<storage, read> ids: array<u32>;        // [tokens]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [tokens][cols]

@compute @workgroup_size(WG)
fn main(gid: Ids) {
    let i = item_index(gid);
    if (i >= p.tokens * p.cols) {
        return;
    }
    let t = i / p.cols;
    let k = i % p.cols;
    let id = ids[t];
    // Ids in another row block are that block's to write; ids outside the vocabulary are
    // rejected on the host. Never read past the table.
    if (id < p.row0 || id - p.row0 >= p.rows) {
        return;
    }
    let row = id - p.row0;
    let g = k / 32u;
    let q = (w[row * (p.cols / 8u) + k / 8u] >> (4u * (k % 8u))) & 15u;
    if (p.kind == 2u) {
        let v = w[(row * p.cols + k) / 4u] << (24u - 8u * (k % 4u));
        let sm = unpack2x16float(w[p.sm_off + row * (p.cols / 32u) + g]);
        out[i] = sm.x * f32(bitcast<i32>(v) >> 24u) - sm.y;
        return;
    }
    if (p.kind != 0u) {
        let sm = unpack2x16float(w[p.sm_off + row * (p.cols / 32u) + g]);
        out[i] = sm.x * f32(q) - sm.y;
        return;
    }
    let b = 2u * (row * (p.cols / 32u) + g);
    let smw = w[p.sm_off + b / 4u] >> (8u * (b % 4u));
    let d = bitcast<f32>(w[p.rows_off + 2u * row]);
    let dmin = bitcast<f32>(w[p.rows_off + 2u * row + 1u]);
    out[i] = d * f32(smw & 0xFFu) * f32(q) - dmin * f32((smw >> 8u) & 0xFFu);
}
