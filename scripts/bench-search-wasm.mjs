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
import { readFileSync } from 'node:fs';
import { LONG, benchAnswer, launchChromium, loadBundle, tellWorker } from './page-driver.mjs';

const [url, id, questionsPath, repeatArg] = process.argv.slice(2);
if (!url || !id || !questionsPath) {
  console.error('usage: bench-search-wasm.mjs URL BUNDLE_ID QUESTIONS.jsonl [REPEAT]');
  process.exit(2);
}
const repeat = Number(repeatArg || 20);
const queries = readFileSync(questionsPath, 'utf8').split('\n').filter((l) => l.trim())
  .map((l) => JSON.parse(l).question);

function pct(xs, p) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}
function summary(xs) {
  return { n: xs.length, p50_ms: pct(xs, 50), p99_ms: pct(xs, 99) };
}

const browser = await launchChromium(['--enable-unsafe-webgpu']);
try {
  const page = await (await browser.newContext()).newPage();
  page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
  const answer = benchAnswer(page);
  await page.goto(url);
  const { load_s: loadSeconds } = await loadBundle(page, id);
  // The worker's own message handler gets the request (as if the page had posted it).
  await tellWorker(page, { type: 'bench', queries, k: 10, repeat });
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error('no bench result in time')), LONG);
  });
  const r = await Promise.race([answer, late]);
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
