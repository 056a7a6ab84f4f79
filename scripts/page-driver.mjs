// What the page scripts share (bench-page.mjs, bench-page-gpu.mjs, soak-page.mjs,
// bench-search-wasm.mjs, bench-kernel-page.mjs): headless Chromium started with one set of
// flags, a bundle loaded through the page's UI, the engine worker found and sent a message, and
// the worker's benchmark answer read from the console, where the page logs it as
// `lorekeeper-bench {json}`.
import { chromium } from 'playwright-core';

// The longest a load or an answer may take (ms).
export const LONG = 1_800_000;

// Debian's headless Chromium, quiet (no background traffic or updates), with `extra` flags
// (e.g. `--enable-unsafe-webgpu`) and those of LK_CHROME_ARGS (e.g. Dawn toggles).
export function launchChromium(extra = []) {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless=new', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic', ...extra,
      ...(process.env.LK_CHROME_ARGS ?? '').split(' ').filter(Boolean)],
  });
}

// Loads bundle `id` through the UI of `page` (already at the site): seconds the load took
// and where the engine runs (`#runs-on`). A load the page reports failed is an error.
export async function loadBundle(page, id) {
  await page.waitForSelector('#bundle', { timeout: 60_000 });
  await page.selectOption('#bundle', id);
  const t0 = Date.now();
  await page.click('#load');
  await page.waitForSelector('#phase.ready, #load-error', { timeout: LONG });
  const err = await page.$('#load-error');
  if (err) throw new Error(`load failed: ${await err.textContent()}`);
  return { load_s: (Date.now() - t0) / 1e3, runs_on: await page.textContent('#runs-on') };
}

// The page's engine worker (the one its worker-boot.js started).
export function engineWorker(page) {
  const worker = page.workers().find((w) => w.url().includes('worker-boot'));
  if (!worker) throw new Error('no engine worker in the page');
  return worker;
}

// The next benchmark answer `page` logs; console errors on the way go to stderr. Listen
// before sending the request.
export function benchAnswer(page) {
  return new Promise((resolve) => {
    page.on('console', (m) => {
      const t = m.text();
      if (t.startsWith('lorekeeper-bench ')) resolve(JSON.parse(t.slice('lorekeeper-bench '.length)));
      else if (m.type() === 'error') console.error(`[console.error] ${t}`);
    });
  });
}

// Sends `msg` (an object, as the page's UI would post it) to the engine worker.
export async function tellWorker(page, msg) {
  await engineWorker(page).evaluate((m) => self.dispatchEvent(new MessageEvent('message', { data: m })),
    JSON.stringify(msg));
}
