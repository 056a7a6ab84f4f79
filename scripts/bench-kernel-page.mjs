// One block GEMV kernel alone in headless Chromium's WebGPU (SwiftShader here): the page's own
// compiler (Tint) and driver, without the engine around it, to measure a kernel variant in
// seconds. Random weights (wrong results are fine: only the time is read).
//
//   node scripts/bench-kernel-page.mjs N K KIND CONSTANTS [REPS] [ITERS] [WGSL …]
//
// N x K: the matrix (rows, columns, K a multiple of 32); KIND: the weights' layout as
// gemv_common.wgsl numbers it (0 LQ4, 1 lq4h, 2 q8_0); CONSTANTS: the pipeline's override
// constants as JSON, e.g. '{"WG":8,"TPR":1,"RPL":8,"KIND":1}'. The shader is the files given,
// joined in order, by default engine/src/gpu/kernels/gemv_common.wgsl and q4_gemv_groups.wgsl
// (the rasterisers' group kernel, as `shader!` joins them). Each of REPS (5) repetitions times
// ITERS (5) dispatches in one pass, wall clock to onSubmittedWorkDone. Prints one JSON line: the
// repetitions' milliseconds per dispatch, sorted, and the bytes moved (weights, activations,
// output) per second at the best one.
//
// Stop 79 (README, "GPU decode") used it to find what bounds the GEMV on SwiftShader, e.g.
//   node scripts/bench-kernel-page.mjs 49152 576 2 '{"WG":8,"TPR":1,"RPL":8,"KIND":2}'
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { launchChromium } from './page-driver.mjs';

const [nArg, kArg, kindArg, constsArg, repsArg, itersArg, ...files] = process.argv.slice(2);
if (!nArg || !kArg || !kindArg || !constsArg) {
  console.error('usage: bench-kernel-page.mjs N K KIND CONSTANTS [REPS] [ITERS] [WGSL …]');
  process.exit(2);
}
const cfg = {
  n: Number(nArg), k: Number(kArg), kind: Number(kindArg), consts: JSON.parse(constsArg),
  reps: Number(repsArg || 5), iters: Number(itersArg || 5),
};
if (!(cfg.n > 0) || !(cfg.k > 0) || cfg.k % 32 !== 0 || ![0, 1, 2].includes(cfg.kind)) {
  console.error(`N must be positive, K a positive multiple of 32, KIND 0, 1 or 2: ${nArg} ${kArg} ${kindArg}`);
  process.exit(2);
}
const dir = new URL('../engine/src/gpu/kernels/', import.meta.url);
const sources = files.length ? files : [new URL('gemv_common.wgsl', dir), new URL('q4_gemv_groups.wgsl', dir)];
cfg.code = sources.map((f) => readFileSync(f, 'utf8')).join('\n');

// The page runs in the browser: buffers as the kernel's bindings want them (gemv_common.wgsl's
// `Params`, the weights' words with the scale section after the codes), then the timed loop.
async function run(cfg) {
  const a = await navigator.gpu.requestAdapter();
  const d = await a.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: a.limits.maxStorageBufferBindingSize,
      maxBufferSize: a.limits.maxBufferSize,
    },
  });
  const { n, k, kind } = cfg;
  const groups = (n * k) / 32;
  const codeWords = kind === 2 ? (n * k) / 4 : (n * k) / 8;
  const smWords = kind === 0 ? Math.ceil(groups / 2) : groups; // LQ4: two bytes a group
  const rowsWords = kind === 0 ? 2 * n : 0;                    // LQ4: (d, dmin) per row
  const words = codeWords + smWords + rowsWords + 4;
  const w = new Uint32Array(words);
  for (let i = 0; i < words; i++) w[i] = (Math.random() * 4294967296) >>> 0;
  if (kind !== 0) {
    // Finite f16 scales (random bits would hold infinities and NaNs).
    const h = new Uint16Array(w.buffer);
    for (let i = 2 * codeWords; i < 2 * (codeWords + smWords); i++) h[i] = 0x1400 | (h[i] & 0x83ff);
  }
  const buf = (size, usage, data) => {
    const b = d.createBuffer({ size, usage: usage | GPUBufferUsage.COPY_DST });
    if (data) d.queue.writeBuffer(b, 0, data);
    return b;
  };
  const wb = buf(words * 4, GPUBufferUsage.STORAGE, w);
  const xb = buf(k * 4, GPUBufferUsage.STORAGE, new Float32Array(k).map(() => Math.random() - 0.5));
  const ob = buf(n * 4, GPUBufferUsage.STORAGE);
  const p = new Uint32Array(16);
  p.set([1, n, k, codeWords, codeWords + smWords, n, 0, kind]);
  const pb = buf(64, GPUBufferUsage.UNIFORM, p);
  const module = d.createShaderModule({ code: cfg.code });
  const pipe = await d.createComputePipelineAsync({
    layout: 'auto', compute: { module, entryPoint: 'main', constants: cfg.consts },
  });
  const bg = d.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: [pb, wb, xb, ob].map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const c = cfg.consts;
  const rows = ((c.WG ?? 64) / (c.TPR ?? 8)) * (c.RPL ?? 1);
  const go = async (iters) => {
    const e = d.createCommandEncoder();
    const pass = e.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bg);
    for (let i = 0; i < iters; i++) pass.dispatchWorkgroups(Math.ceil(n / rows));
    pass.end();
    d.queue.submit([e.finish()]);
    await d.queue.onSubmittedWorkDone();
  };
  await go(1);
  const ms = [];
  for (let r = 0; r < cfg.reps; r++) {
    const t = performance.now();
    await go(cfg.iters);
    ms.push((performance.now() - t) / cfg.iters);
  }
  ms.sort((x, y) => x - y);
  const bytes = words * 4 + k * 4 + n * 4;
  const info = a.info ?? {};
  return {
    adapter: [info.vendor, info.architecture, info.description].filter(Boolean).join(' '),
    ms: ms.map((t) => Number(t.toFixed(2))),
    gb_s: Number((bytes / ms[0] / 1e6).toFixed(3)),
  };
}

// WebGPU needs a secure context: a blank page from localhost.
const server = createServer((_, res) => res.end('<html></html>')).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const browser = await launchChromium(['--enable-unsafe-webgpu']);
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.error(m.text()); });
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  console.log(JSON.stringify(await page.evaluate(run, cfg)));
} finally {
  await browser.close();
  server.close();
}
