// The page against wllama 3.8.1 in the same headless Chromium (no WebGPU: a reader without a
// GPU), served with COOP/COEP. Run by scripts/bench-page.sh, which builds and serves the site.
//
//   node scripts/bench-page.mjs URL BUNDLE_ID QUESTION [GEN_TOKENS] [RUNS]
//
// URL serves the web app (bundle BUNDLE_ID: a q4 bundle made from MODEL), wllama under
// wllama/ and the GGUF as model.gguf. For each of "threads" (all the browser's threads) and
// "single" (one):
//   wllama: loadModelFromUrl(model.gguf, n_threads, n_gpu_layers 0), a raw completion of the
//     benchmark text (greedy, ignore_eos, no prompt cache), its own timings (prompt_per_second,
//     predicted_per_second), median of RUNS;
//   lorekeeper: the page loads the bundle, then its worker gets a `bench_decode` message with
//     wllama's prompt length (the same text's tokens): prefill, then GEN greedy steps, medians.
// Then the demo question through the page's UI (auto backend): time to first streamed token and
// total. Prints one JSON object.
import { LONG, benchAnswer, launchChromium, loadBundle as loadThrough, tellWorker } from './page-driver.mjs';

const [url, id, question, genArg, runsArg] = process.argv.slice(2);
if (!url || !id || !question) {
  console.error('usage: bench-page.mjs URL BUNDLE_ID QUESTION [GEN_TOKENS] [RUNS]');
  process.exit(2);
}
const GEN = Number(genArg || 128);
const RUNS = Number(runsArg || 3);
// engine/src/generate.rs BENCH_TEXT, repeated (about 530 tokens).
const BENCH_TEXT = "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations in it, 'and what is the use of a book,' thought Alice 'without pictures or conversations?' ";
const PROMPT = BENCH_TEXT.repeat(8);

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

async function withPage(fn) {
  const browser = await launchChromium();
  try {
    const page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
    return await fn(page);
  } finally {
    await browser.close();
  }
}

async function wllama(threads) {
  return withPage(async (page) => {
    page.on('console', (m) => { if (m.type() === 'error') console.error(`[wllama console] ${m.text()}`); });
    await page.goto(new URL('wllama/index.html', url).href);
    await page.waitForFunction(() => window.benchWllama, null, { timeout: 60_000 });
    const r = await page.evaluate((a) => window.benchWllama(a), { threads, prompt: PROMPT, gen: GEN, runs: RUNS });
    return {
      threads: r.info.threads, multithread: r.info.multithread, isolated: r.info.isolated,
      prompt_tokens: r.runs[0].prompt_n, gen_tokens: r.runs[0].predicted_n,
      prefill_tok_s: median(r.runs.map((x) => x.prompt_per_second)),
      decode_tok_s: median(r.runs.map((x) => x.predicted_per_second)),
    };
  });
}

async function loadBundle(page, threads) {
  // The page's threads: all (its default) or one (`?threads=1`).
  await page.goto(threads === 1 ? new URL('?threads=1', url).href : url);
  return loadThrough(page, id);
}

async function lorekeeper(promptTokens, threads) {
  return withPage(async (page) => {
    const result = benchAnswer(page);
    const { runs_on } = await loadBundle(page, threads);
    await tellWorker(page, { type: 'bench_decode', prompt_tokens: promptTokens, gen_tokens: GEN, runs: RUNS });
    const r = await result;
    if (r.type === 'failed') throw new Error(r.message);
    return { backend: r.backend, runs_on, prompt_tokens: r.prompt_tokens, gen_tokens: r.gen_tokens, ...r.result };
  });
}

async function demoQuestion() {
  return withPage(async (page) => {
    const { load_s, runs_on } = await loadBundle(page, 0);
    await page.fill('#question', question);
    const t0 = Date.now();
    await page.click('#ask');
    // An extractive answer (the default for a small model) may finish before the streaming
    // line is ever seen.
    await page.waitForSelector('#streaming, .turn:last-child .answer-view, .turn:last-child .turn-error', { timeout: LONG });
    // The first generated character: the placeholder counts output characters until the
    // answer's own text streams.
    await page.waitForFunction(() => {
      const t = document.querySelector('#streaming')?.textContent || '';
      return (t.length > 0 && !/\(0 characters of output\)/.test(t))
        || document.querySelector('.turn:last-child .answer-view, .turn:last-child .turn-error') !== null;
    }, null, { timeout: LONG });
    const ttft = (Date.now() - t0) / 1e3;
    await page.waitForSelector('.turn:last-child .answer-view, .turn:last-child .turn-error', { timeout: LONG });
    const total = (Date.now() - t0) / 1e3;
    const view = page.locator('.turn').last();
    const timing = view.locator('.timing');
    return {
      runs_on, load_s, ttft_s: ttft, total_s: total,
      retrieval_ms: Number(await timing.getAttribute('data-retrieval-ms')),
      action: await view.locator('.answer-view').getAttribute('data-action'),
      answer: (await view.locator('.final-answer').textContent()).trim(),
    };
  });
}

const out = { lorekeeper: {}, wllama: {}, ratio: {} };
for (const [mode, threads] of [['threads', 0], ['single', 1]]) {
  const w = await wllama(threads);
  out.wllama[mode] = w;
  out.lorekeeper[mode] = await lorekeeper(w.prompt_tokens, threads);
  out.ratio[mode] = {
    prefill: out.lorekeeper[mode].prefill_tok_s / w.prefill_tok_s,
    decode: out.lorekeeper[mode].decode_tok_s / w.decode_tok_s,
  };
}
out.demo_question = { question, ...(await demoQuestion()) };
console.log(JSON.stringify(out));
