// A soak of the page: N questions asked one after another through the UI of one page (the
// engine worker loaded once), as a reader would, in headless Chromium without WebGPU. Run by
// scripts/soak-page.sh, which builds and serves the site.
//
//   node scripts/soak-page.mjs URL BUNDLE_ID QUESTIONS.jsonl N [NATIVE_EVAL.json]
//
// The questions are the set's, in order, repeated until N have been asked. Memory is sampled
// after the first answer and after every 50th: the worker's wasm memory (`memory.buffer` of the
// engine's exports; it never shrinks, so growth is a leak or a new high-water mark), the resident
// memory of Chromium's renderer processes (/proc: the page, its worker and the CPU pool), and
// the page's JS heap. With NATIVE_EVAL (`lorekeeper eval --json` on the same bundle and set), each
// page answer of the first pass is compared with the native one, and the answers equal to it
// count as containing the gold where the native eval found it. Prints one JSON object.
import { readFileSync, readdirSync } from 'node:fs';
import { LONG, engineWorker, launchChromium, loadBundle } from './page-driver.mjs';

const [url, id, questionsPath, nArg, nativePath] = process.argv.slice(2);
if (!url || !id || !questionsPath) {
  console.error('usage: soak-page.mjs URL BUNDLE_ID QUESTIONS.jsonl N [NATIVE_EVAL.json]');
  process.exit(2);
}
const N = Number(nArg || 200);
const set = readFileSync(questionsPath, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const native = nativePath ? new Map(JSON.parse(readFileSync(nativePath, 'utf8')).items.map((i) => [i.id, i])) : null;

const MIB = 1024 * 1024;
const bare = (t) => t.replace(/(\s*\[E\d+\])*\s*$/, '').trim();
// Resident memory of every Chromium renderer process (the page's, which holds its workers).
function rendererRssMib() {
  let kb = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) kb += Number(m[1]);
    } catch { /* the process ended */ }
  }
  return kb / 1024;
}

const browser = await launchChromium(['--enable-precise-memory-info']);
const out = { questions: 0, errors: 0, actions: {}, samples: [] };
try {
  const page = await (await browser.newContext()).newPage();
  page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
  await page.goto(url);
  out.runs_on = (await loadBundle(page, id)).runs_on;
  const worker = engineWorker(page);

  const sample = async (asked) => out.samples.push({
    asked,
    wasm_mib: (await worker.evaluate(() => self.lorekeeperWasm?.memory?.buffer?.byteLength ?? 0)) / MIB,
    renderer_rss_mib: rendererRssMib(),
    page_heap_mib: (await page.evaluate(() => performance.memory?.usedJSHeapSize ?? 0)) / MIB,
  });

  const seconds = [];
  let answerable = 0; let containsGold = 0; let same = 0; let compared = 0;
  for (let i = 0; i < N; i++) {
    const q = set[i % set.length];
    // The page keeps its last 100 turns (app/src/chat_log.rs), so a new turn is told by a mark
    // on the last one before asking, not by their count.
    await page.evaluate(() => [...document.querySelectorAll('.turn')].pop()?.setAttribute('data-soak-seen', ''));
    await page.fill('#question', q.question);
    const t0 = Date.now();
    await page.click('#ask');
    await page.waitForFunction(() => {
      const t = document.querySelectorAll('.turn');
      const last = t[t.length - 1];
      return last && !last.hasAttribute('data-soak-seen') && last.querySelector('.answer-view, .turn-error');
    }, null, { timeout: LONG });
    seconds.push((Date.now() - t0) / 1e3);
    const turn = page.locator('.turn').last();
    if (await turn.locator('.turn-error').count()) {
      out.errors += 1;
      console.error(`[error] ${q.id}: ${await turn.locator('.turn-error').textContent()}`);
    } else {
      const action = await turn.locator('.answer-view').getAttribute('data-action');
      out.actions[action] = (out.actions[action] || 0) + 1;
      // The answer as the native eval records it, the cite marks after it left out.
      const answer = bare(await turn.locator('.final-answer').textContent());
      if (i < set.length) {
        if (!q.unanswerable && q.answers?.length) answerable += 1;
        const n = native?.get(q.id);
        if (n) {
          compared += 1;
          // An answer equal to the native one contains the gold where the engine's own rule
          // (eval.rs `contains_gold`) found it natively; it is not judged again here.
          if (bare(n.answer) === answer) {
            same += 1;
            if (n.contains_gold) containsGold += 1;
          } else console.error(`[differs] ${q.id}: page ${JSON.stringify(answer)} native ${JSON.stringify(n.answer)}`);
        }
      }
    }
    out.questions += 1;
    console.error(`[${i + 1}/${N}] ${q.id} ${seconds[seconds.length - 1].toFixed(2)} s`);
    if (i === 0 || (i + 1) % 50 === 0 || i === N - 1) await sample(i + 1);
  }
  const sorted = [...seconds].sort((a, b) => a - b);
  out.seconds = { mean: seconds.reduce((a, b) => a + b, 0) / seconds.length, p50: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1] };
  out.first_pass = { answerable, ...(native ? { same_as_native: same, compared, contains_gold: containsGold } : {}) };
  const [first, last] = [out.samples[0], out.samples[out.samples.length - 1]];
  out.growth_mib = {
    wasm: last.wasm_mib - first.wasm_mib,
    renderer_rss: last.renderer_rss_mib - first.renderer_rss_mib,
    page_heap: last.page_heap_mib - first.page_heap_mib,
  };
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
