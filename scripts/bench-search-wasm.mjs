// Retrieval latency in the browser: the web app's worker (wasm) on a loaded bundle, in a real
// headless Chromium driven by playwright-core. Run by scripts/bench-search.sh, which builds and
// serves the site with the bundle as `bench`.
//
//   node scripts/bench-search-wasm.mjs URL BUNDLE_ID QUESTIONS.jsonl [REPEAT]
//
// The script loads the bundle through the page, then hands the worker a `bench` message (the
// same message type the page would send) with every question of the file; the worker embeds each
// query on the WebGPU adapter and on the wasm CPU backend and runs the fused search REPEAT times.
// Prints one JSON object: p50/p99 per measure, in milliseconds.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';

const [url, id, questionsPath, repeatArg] = process.argv.slice(2);
if (!url || !id || !questionsPath) {
  console.error('usage: bench-search-wasm.mjs URL BUNDLE_ID QUESTIONS.jsonl [REPEAT]');
  process.exit(2);
}
const repeat = Number(repeatArg || 20);
const queries = readFileSync(questionsPath, 'utf8').split('\n').filter((l) => l.trim())
  .map((l) => JSON.parse(l).question);
const LONG = 1_800_000;

function pct(xs, p) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}
function summary(xs) {
  return { n: xs.length, p50_ms: pct(xs, 50), p99_ms: pct(xs, 99) };
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless=new', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic', '--enable-unsafe-webgpu'],
});
try {
  const page = await (await browser.newContext()).newPage();
  page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
  let resolveBench, rejectBench;
  const result = new Promise((res, rej) => { resolveBench = res; rejectBench = rej; });
  page.on('console', (m) => {
    const t = m.text();
    if (t.startsWith('lorekeeper-bench ')) resolveBench(JSON.parse(t.slice('lorekeeper-bench '.length)));
    else if (m.type() === 'error') console.error(`[console.error] ${t}`);
  });
  await page.goto(url);
  await page.waitForSelector('#bundle', { timeout: 60_000 });
  await page.selectOption('#bundle', id);
  const t0 = Date.now();
  await page.click('#load');
  await page.waitForSelector('#phase.ready', { timeout: LONG });
  const loadSeconds = (Date.now() - t0) / 1e3;
  const worker = page.workers().find((w) => w.url().includes('worker'));
  if (!worker) throw new Error('no engine worker in the page');
  // The worker's own message handler gets the request (as if the page had posted it).
  await worker.evaluate((msg) => self.dispatchEvent(new MessageEvent('message', { data: msg })),
    JSON.stringify({ type: 'bench', queries, k: 10, repeat }));
  const timer = setTimeout(() => rejectBench(new Error('no bench result in time')), LONG);
  const r = await result;
  clearTimeout(timer);
  if (r.type !== 'bench') throw new Error(`unexpected reply ${JSON.stringify(r).slice(0, 300)}`);
  console.log(JSON.stringify({
    browser: `chromium ${browser.version()}`,
    adapter: r.adapter,
    passages: r.passages,
    queries: queries.length,
    repeat,
    load_seconds: loadSeconds,
    search: summary(r.search_ms),
    embed_query_webgpu: summary(r.embed_gpu_ms),
    embed_query_wasm_cpu: summary(r.embed_cpu_ms),
    top_ids: r.top_ids,
  }));
} finally {
  await browser.close();
}
