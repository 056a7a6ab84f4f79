// The page's decode on WebGPU in headless Chromium (SwiftShader here: a reader whose browser
// offers only its software adapter), one or more builds of the page alternated in one run.
//
//   node scripts/bench-page-gpu.mjs BUNDLE_ID PROMPT_TOKENS GEN_TOKENS ROUNDS URL [URL …]
//
// Each URL serves a web app with bundle BUNDLE_ID (e.g. this build and an older one, each
// with the bundle its own index-builder wrote), its query kept (`?gpu_tuning=field:value,…`
// measures a kernel variant). For each round and each URL in turn, a fresh Chromium with
// `--enable-unsafe-webgpu` loads the page with `backend=gpu` added, then its worker gets
// a `bench_decode` message (prefill of PROMPT_TOKENS, then GEN_TOKENS greedy steps, one run)
// and reports its timings. Prints one JSON object: every run, and the median per URL. With
// LK_PROFILE=1 the worker also profiles the decode steps and each run's table goes to stderr.
import { benchAnswer, launchChromium, loadBundle, tellWorker } from './page-driver.mjs';

const [id, promptArg, genArg, roundsArg, ...urls] = process.argv.slice(2);
if (!id || !promptArg || !genArg || !roundsArg || urls.length === 0) {
  console.error('usage: bench-page-gpu.mjs BUNDLE_ID PROMPT_TOKENS GEN_TOKENS ROUNDS URL [URL …]');
  process.exit(2);
}
const PROMPT = Number(promptArg);
const GEN = Number(genArg);
const ROUNDS = Number(roundsArg);
// LK_PROFILE=1: each run also profiles GEN decode steps (dispatches, submissions, device time
// per kernel from timestamps; add LK_CHROME_ARGS=--enable-webgpu-developer-features for
// unrounded ones) and prints the table to stderr.
const PROFILE = process.env.LK_PROFILE === '1';

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

async function once(url) {
  const browser = await launchChromium(['--enable-unsafe-webgpu']);
  try {
    const page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
    const result = benchAnswer(page);
    const u = new URL(url);
    await page.goto(`${u.origin}${u.pathname}${u.search ? `${u.search}&` : '?'}backend=gpu`);
    const { runs_on: runsOn } = await loadBundle(page, id);
    await tellWorker(page, { type: 'bench_decode', prompt_tokens: PROMPT, gen_tokens: GEN, runs: 1, profile: PROFILE });
    const r = await result;
    if (r.type === 'failed') throw new Error(r.message);
    if (!/gpu|webgpu|swiftshader/i.test(`${r.backend} ${runsOn}`)) {
      throw new Error(`the page did not run on WebGPU: ${r.backend} / ${runsOn}`);
    }
    return { backend: r.backend, runs_on: runsOn, ...r.result, profile: r.profile };
  } finally {
    await browser.close();
  }
}

function printProfile(p) {
  const busy = p.kernels.reduce((a, k) => a + k[2], 0);
  console.error(`profile: ${p.dispatches.toFixed(1)} dispatches and ${p.submissions.toFixed(1)} submissions per token; `
    + (p.timed ? `device busy ${busy.toFixed(3)} ms per token (each dispatch timed alone)` : 'no timestamps'));
  console.error('| kernel | dispatches/token | device ms/token | share | weight GB/s |');
  console.error('|---|---|---|---|---|');
  for (const [label, n, ms, bytes] of p.kernels) {
    const gbs = bytes > 0 && ms > 0 ? (bytes / ms / 1e6).toFixed(1) : '—';
    console.error(`| ${label} | ${n.toFixed(1)} | ${ms.toFixed(3)} | ${(100 * ms / (busy || 1)).toFixed(1)} % | ${gbs} |`);
  }
}

const runs = Object.fromEntries(urls.map((u) => [u, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const url of urls) {
    const r = await once(url);
    console.error(`round ${round + 1} ${url}: prefill ${r.prefill_tok_s} tok/s, decode ${r.decode_tok_s} tok/s (${r.backend})`);
    runs[url].push(r);
    if (r.profile) printProfile(r.profile);
  }
}
const out = {};
for (const url of urls) {
  out[url] = {
    backend: runs[url][0].backend,
    prefill_tok_s: median(runs[url].map((r) => r.prefill_tok_s)),
    decode_tok_s: median(runs[url].map((r) => r.decode_tok_s)),
    decode_runs: runs[url].map((r) => r.decode_tok_s),
  };
}
console.log(JSON.stringify({ prompt_tokens: PROMPT, gen_tokens: GEN, rounds: ROUNDS, pages: out }));
