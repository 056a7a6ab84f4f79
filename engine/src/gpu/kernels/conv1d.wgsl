// Causal depthwise conv1d with SiLU and a rolling state (Qwen3.5's linear-attention conv):
//   out[t][c] = silu(sum_j w[c][j] * in(t - (K-1) + j)),  in(s) = x[s][c] for s >= 0, else the
//   state's previous inputs; afterwards the state holds the last K-1 inputs.
// One invocation per channel walks the tokens in order, so the state is updated in place
// without a race, and a decode step (T = 1) reads and writes it exactly once. Prelude: common.wgsl.

// Longest kernel a private window holds (Qwen3.5 uses 4); the host refuses longer ones.
const MAX_K: u32 = 8u;

struct Params {
    tokens: u32,
    channels: u32,
    kernel: u32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;            // [tokens, channels]
@group(0) @binding(2) var<storage, read> w: array<f32>;            // [channels, kernel]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;  // [kernel - 1, channels], oldest first
@group(0) @binding(4) var<storage, read_write> out: array<f32>;    // [tokens, channels]

@compute @workgroup_size(WG)
fn main(g: Ids) {
    let c = item_index(g);
    if (c >= p.channels) {
        return;
    }
    let k = p.kernel;
    let cs = p.channels;
    var win: array<f32, MAX_K>;
    for (var j = 0u; j + 1u < k; j++) {
        win[j] = state[j * cs + c];
    }
    for (var t = 0u; t < p.tokens; t++) {
        win[k - 1u] = x[t * cs + c];
        var acc = 0.0;
        for (var j = 0u; j < k; j++) {
            acc += w[c * k + j] * win[j];
        }
        out[t * cs + c] = acc / (1.0 + exp(-acc));
        for (var j = 0u; j + 1u < k; j++) {
            win[j] = win[j + 1u];
        }
    }
    for (var j = 0u; j + 1u < k; j++) {
        state[j * cs + c] = win[j];
    }
}
