// The web app in a real headless Chromium (Debian's, WebGPU on SwiftShader), driven by
// playwright-core. Run by tests/web-app/run.sh, which builds the site and the tiny bundles and
// records the native engine's answer to the same question.
//
//   node tests/web-app/e2e.mjs URL NATIVE_JSON QUESTION [SCREENSHOT_DIR]
//
// Each check prints `ok - …` or `not ok - …`; the last line is `N passed, M failed`.
import { chromium } from 'playwright-core';
import { readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [url, nativePath, question, shots] = process.argv.slice(2);
if (!url || !nativePath || !question) {
  console.error('usage: e2e.mjs URL NATIVE_JSON QUESTION [SCREENSHOT_DIR]');
  process.exit(2);
}
const native = JSON.parse(readFileSync(nativePath, 'utf8'));
// The native answer under the default settings (`--mode auto`), where run.sh recorded one.
const nativeAuto = process.env.E2E_NATIVE_AUTO ? JSON.parse(readFileSync(process.env.E2E_NATIVE_AUTO, 'utf8')) : null;
const SETTINGS = JSON.parse(process.env.E2E_SETTINGS || '{"seed":7,"temperature":0.7,"max_tokens":48}');
const FLAGS = ['--headless=new', '--no-sandbox', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
const LONG = 600_000;

let passed = 0, failed = 0;
function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok - ${name}`); }
  else { failed++; console.log(`not ok - ${name}${detail ? `\n    ${detail}` : ''}`); }
}
async function shot(page, name) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
  console.log(`  screenshot ${join(shots, name + '.png')}`);
}

async function launch(webgpu) {
  const args = [...FLAGS];
  if (webgpu) args.push('--enable-unsafe-webgpu');
  return chromium.launch({ executablePath: '/usr/bin/chromium', args });
}

async function newPage(browser) {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log(`  [pageerror] ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || process.env.E2E_CONSOLE) console.log(`  [console.${m.type()}] ${m.text()}`);
  });
  return { context, page };
}

async function loadBundle(page, id) {
  await page.waitForSelector('#bundle', { timeout: 60_000 });
  await page.selectOption('#bundle', id);
  await page.click('#load');
}

async function setSettings(page) {
  await page.click('details.settings summary');
  // The grounded protocol, as the native run: `auto` answers a model this small extractively.
  await page.selectOption('#mode', 'grounded');
  for (const [sel, v] of [['#seed', SETTINGS.seed], ['#temperature', SETTINGS.temperature], ['#max-tokens', SETTINGS.max_tokens]]) {
    await page.fill(sel, String(v));
    await page.dispatchEvent(sel, 'change');
  }
}

async function ask(page, q) {
  const before = await page.locator('.turn').count();
  await page.fill('#question', q);
  await page.click('#ask');
  await page.waitForFunction((n) => {
    const turns = document.querySelectorAll('.turn');
    return turns.length > n && turns[turns.length - 1].querySelector('.answer-view, .turn-error');
  }, before, { timeout: LONG });
  return page.locator('.turn').last();
}

// Waits until the page shows `more` turns beyond `before`, the last one finished.
async function turnsFinished(page, before, more) {
  await page.waitForFunction(([n, k]) => {
    const t = document.querySelectorAll('.turn');
    return t.length >= n + k && t[t.length - 1].querySelector('.answer-view, .turn-error');
  }, [before, more], { timeout: LONG });
}

// What the server was asked for, one `PATH RANGE` line per request (serve.py --log).
function requests(part) {
  const log = process.env.E2E_REQUEST_LOG;
  if (!log) return null;
  return readFileSync(log, 'utf8').split('\n').filter((l) => l.includes(part));
}

async function rawRounds(turn) {
  return turn.locator('pre.raw').evaluateAll((els) =>
    els.map((e) => ({ text: e.textContent, tokens: Number(e.dataset.tokens) })));
}

const nativeRounds = native.rounds
  .filter((r) => r.raw_output.length > 0)
  .map((r) => ({ text: r.raw_output, tokens: r.tokens }));

function sameRounds(name, got) {
  const same = JSON.stringify(got) === JSON.stringify(nativeRounds);
  let detail = '';
  if (!same) {
    const a = got.map((r) => r.text).join('|'), b = nativeRounds.map((r) => r.text).join('|');
    let i = 0; while (i < a.length && a[i] === b[i]) i++;
    detail = `browser ${JSON.stringify(got.map((r) => r.tokens))} tokens, native ${JSON.stringify(nativeRounds.map((r) => r.tokens))}; `
      + `they part at character ${i}: browser ${JSON.stringify(a.slice(i, i + 40))} vs native ${JSON.stringify(b.slice(i, i + 40))}`;
  }
  check(name, same && got.length > 0, detail);
}

// 1. WebGPU (forced with ?backend=gpu: on SwiftShader the automatic choice is the CPU): load
//    with progress, answer, evidence, inert markup.
const gpuUrl = `${url}?backend=gpu`;
{
  const browser = await launch(true);
  const { context, page } = await newPage(browser);
  await page.goto(gpuUrl);

  // A throttled copy of the bundle, to see the download in progress.
  await loadBundle(page, 'tiny-slow');
  await page.waitForFunction(() => {
    const p = document.querySelector('#download-progress');
    return p && Number(p.value) > 15 && Number(p.value) < 85;
  }, null, { timeout: 120_000 });
  const mid = await page.textContent('#progress-text');
  check('progress shows bytes, files and a rate while downloading', /%.*of.*files/.test(mid) && /\/s/.test(mid), mid);
  await shot(page, 'loading');
  await page.waitForSelector('#phase.ready', { timeout: LONG });

  await loadBundle(page, 'tiny');
  await page.waitForSelector('#phase.ready', { timeout: LONG });
  const pct = await page.$eval('#download-progress', (p) => Number(p.value));
  check('download progress reaches 100 %', pct === 100, `progress ${pct}`);
  const loaded = await page.textContent('#loaded');
  check('the loaded bundle is described', /passages/.test(loaded), loaded);
  const runsOn = await page.textContent('#runs-on');
  check('?backend=gpu runs on the WebGPU adapter and says so', /swiftshader/i.test(runsOn) && /backend=gpu/.test(runsOn), runsOn);

  await setSettings(page);
  const turn = await ask(page, question);
  const got = await rawRounds(turn);
  sameRounds('the answer\'s tokens equal the native engine\'s for the same seed', got);
  const action = await turn.locator('.answer-view').getAttribute('data-action');
  check('the final action equals the native one', action === native.final_action, `${action} vs ${native.final_action}`);

  const ev = await page.locator('#evidence article.evidence').evaluateAll((els) =>
    els.map((e) => ({ id: e.dataset.id, text: e.querySelector('.passage').textContent })));
  const nativeEv = native.evidence.map((e) => ({ id: e.id, text: e.text }));
  check('the evidence panel shows the passages the engine retrieved', JSON.stringify(ev) === JSON.stringify(nativeEv),
    `${ev.length} shown, ${nativeEv.length} native`);
  const evText = await page.textContent('#evidence');
  check('corpus markup is shown as text', evText.includes('<script>window.__lorekeeperPwned = 1</script>')
    && evText.includes("<img src='x' onerror="), evText.slice(0, 200));
  const pwned = await page.evaluate(() => window.__lorekeeperPwned);
  const elements = await page.evaluate(() => document.querySelectorAll('#evidence script, #evidence img, .turns script, .turns img').length);
  check('corpus and model markup stays inert (no script ran, no element created)', pwned === undefined && elements === 0,
    `pwned=${pwned}, elements=${elements}`);
  await shot(page, 'answer');

  // 2. Abstention: nothing in the story matches. Meanwhile the earlier turn is not rebuilt:
  //    tokens change only the running turn's line (a marker on the first turn's element
  //    survives the whole second question).
  await page.evaluate(() => { document.querySelector('.turn').__probe = 1; });
  const none = await ask(page, 'xylophone quantum zeppelin');
  check('asking and streaming a new answer leaves the earlier turns\' elements as they were',
    await page.evaluate(() => document.querySelector('.turn').__probe === 1));
  const noneAction = await none.locator('.answer-view').getAttribute('data-action');
  check('a question the story cannot answer abstains', noneAction === 'abstain', noneAction);
  await shot(page, 'abstention');

  // 3. Empty and oversized questions are refused before they are sent.
  await page.fill('#question', '   ');
  check('an empty question cannot be sent', await page.isDisabled('#ask'));
  await page.fill('#question', 'x'.repeat(2001));
  check('a question over 2000 characters cannot be sent', await page.isDisabled('#ask')
    && (await page.textContent('.ask')).includes('limited to 2000'));
  await page.fill('#question', '');

  // 4. A reload with the network to the bundle blocked: everything from the cache.
  let bundleRequests = 0;
  await page.route('**/bundles/tiny/**', (r) => { bundleRequests++; return r.abort(); });
  await page.reload();
  await page.waitForSelector('#phase.ready', { timeout: LONG });
  const again = await page.textContent('#loaded');
  check('after a reload the bundle loads from the cache with the network blocked', again.includes("from this browser's cache"),
    `${again} (${bundleRequests} blocked requests)`);
  check('the chat history survives the reload', (await page.locator('.turn').count()) >= 2);
  await setSettings(page);
  sameRounds('the cached bundle answers with the same tokens', await rawRounds(await ask(page, question)));
  await page.unroute('**/bundles/tiny/**');

  // 5. A lost GPU device (in a fresh page): the page starts a fresh worker and reloads the
  //    bundle from the cache.
  {
    const { context: c2, page: p2 } = await newPage(browser);
    await p2.goto(gpuUrl);
    await loadBundle(p2, 'tiny');
    await p2.waitForSelector('#phase.ready', { timeout: LONG });
    await setSettings(p2);
    await p2.evaluate(() => window.lorekeeperLoseDevice());
    // The answer in progress ends with a clear message; the page starts a fresh worker, which
    // reloads the bundle from the cache, and asks the question again by itself.
    const n0 = await p2.locator('.turn').count();
    await p2.fill('#question', question);
    await p2.click('#ask');
    await turnsFinished(p2, n0, 2);
    const lostText = await p2.locator('.turn').nth(n0).textContent();
    const notice = await p2.textContent('#notice');
    check('a lost device is reported and the engine re-initialises without a page reload',
      /GPU device was lost/.test(notice) && /GPU was reset/.test(lostText) && /asked again/.test(lostText),
      `${notice} | ${lostText.slice(0, 200)}`);
    const redone = p2.locator('.turn').last();
    check('the question cut short by the lost device is asked again',
      (await redone.locator('.question').textContent()) === question);
    sameRounds('the question asked again after the device loss gets the same tokens', await rawRounds(redone));

    // Stop: a long answer is cut short and still checked.
    await p2.fill('#max-tokens', '400');
    await p2.dispatchEvent('#max-tokens', 'change');
    const n = await p2.locator('.turn').count();
    await p2.fill('#question', question);
    await p2.click('#ask');
    await p2.waitForSelector('#streaming', { timeout: LONG });
    await p2.waitForTimeout(1500);
    await p2.click('#stop');
    await p2.waitForFunction((n) => {
      const t = document.querySelectorAll('.turn');
      return t.length > n && t[t.length - 1].querySelector('.answer-view, .turn-error');
    }, n, { timeout: LONG });
    const stopped = await rawRounds(p2.locator('.turn').last());
    const used = stopped.reduce((a, r) => a + r.tokens, 0);
    check('Stop ends the generation early and the answer is still shown', used < 400 && stopped.length > 0,
      `${used} tokens in ${stopped.length} round(s)`);

    // A panic in the worker mid-answer (test hook): the answer in progress ends with a clear
    // error instead of hanging, a fresh worker reloads the bundle from the cache, and the same
    // question then gets the same tokens.
    // (Still 400 tokens, so the crash lands mid-answer; the question asked again reads the
    // settings when it is sent, by then the native run's.)
    const m = await p2.locator('.turn').count();
    await p2.fill('#question', question);
    await p2.click('#ask');
    await p2.waitForSelector('#streaming', { timeout: LONG });
    await p2.evaluate(() => window.lorekeeperCrashWorker());
    await p2.fill('#max-tokens', String(SETTINGS.max_tokens));
    await p2.dispatchEvent('#max-tokens', 'change');
    await turnsFinished(p2, m, 2);
    const crashed = await p2.locator('.turn').nth(m).textContent();
    const crashNotice = await p2.textContent('#notice');
    check('a panic in the worker mid-answer ends the answer with an error and the engine restarts',
      /engine stopped/.test(crashed) && /test hook/.test(crashed) && /restarted/.test(crashNotice),
      `${crashed.slice(0, 200)} | ${crashNotice}`);
    sameRounds('after the crash the question is asked again and gets the same tokens',
      await rawRounds(p2.locator('.turn').last()));

    // A failure that repeats: after two fresh starts the page stops retrying and says so.
    for (let i = 0; i < 2; i++) {
      await p2.evaluate(() => window.lorekeeperCrashWorker());
      await p2.waitForFunction(() => !document.querySelector('#phase.ready'), null, { timeout: 60_000 });
      await p2.waitForSelector('#phase.ready', { timeout: LONG });
    }
    await p2.evaluate(() => window.lorekeeperCrashWorker());
    await p2.waitForSelector('#load-error', { timeout: 60_000 });
    const gaveUp = await p2.textContent('#load-error');
    check('a worker that keeps crashing is restarted twice, then the page says so and stops',
      /engine stopped/.test(gaveUp) && /3 times in a row/.test(gaveUp), gaveUp);
    await c2.close();
  }

  // 6. A corrupted shard.
  await loadBundle(page, 'tiny-corrupt');
  await page.waitForSelector('#load-error', { timeout: LONG });
  const err = await page.textContent('#load-error');
  check('a corrupted shard gives a clear error naming the shard', /sha256/.test(err) && /model-\d+-[0-9a-f]+\.bin/.test(err), err);
  await shot(page, 'error-corrupt');

  // 6b. A catalog that pins another manifest: refused before anything is downloaded or kept.
  await loadBundle(page, 'tiny-repinned');
  await page.waitForSelector('#load-error', { timeout: LONG });
  const pinErr = await page.textContent('#load-error');
  check('a manifest that does not match the catalog\'s manifest_sha256 is refused, naming both',
    /manifest\.json: sha256 is [0-9a-f]{64}, bundles\/index\.json says [0-9a-f]{64}/.test(pinErr), pinErr);
  await context.close();
  await browser.close();
}

// 7. The automatic choice: SwiftShader is a software adapter, so the page runs the CPU path
//    (wasm SIMD) and answers with the native engine's tokens; a browser without WebGPU does
//    the same.
{
  const browser = await launch(true);
  const { context, page } = await newPage(browser);
  await page.goto(url);
  await loadBundle(page, 'tiny');
  await page.waitForSelector('#phase.ready', { timeout: LONG });
  const runsOn = await page.textContent('#runs-on');
  check('with only a software adapter the page runs on the CPU path and says why',
    /^Runs on: cpu \((simd128|relaxed-simd), \d+ threads?\)/.test(runsOn) && /software adapter/.test(runsOn), runsOn);
  await setSettings(page);
  sameRounds('the CPU path in the page answers with the native engine\'s tokens', await rawRounds(await ask(page, question)));
  await shot(page, 'answer-cpu');

  // A server that drops every transfer of a model shard that starts at byte 0 (serve.py
  // --cut): only resuming with a range completes it, starting over never can.
  await loadBundle(page, 'tiny-cut');
  await page.waitForSelector('#phase.ready, #load-error', { timeout: LONG });
  const cutLoaded = (await page.$('#loaded')) ? await page.textContent('#loaded') : await page.textContent('#load-error');
  const ranges = requests('/bundles/tiny-cut/model-') || [];
  check('a shard whose transfer breaks off is resumed where it stopped (Range) and the bundle loads',
    /passages/.test(cutLoaded) && ranges.some((l) => / bytes=[1-9]\d*-$/.test(l)),
    `${cutLoaded} | ${ranges.join('; ')}`);
  sameRounds('the resumed bundle answers with the native engine\'s tokens', await rawRounds(await ask(page, question)));

  // A bundle larger than a page can hold: refused from its manifest, before any shard is asked
  // for, with what it needs.
  await loadBundle(page, 'tiny-huge');
  await page.waitForSelector('#load-error', { timeout: LONG });
  const huge = await page.textContent('#load-error');
  const hugeShards = (requests('/bundles/tiny-huge/') || ['(no request log)']).filter((l) => !l.includes('manifest.json'));
  check('a bundle larger than the page can hold is refused before download, saying what it needs',
    /too large for a browser page/.test(huge) && /nothing was downloaded/.test(huge) && /MiB of shards/.test(huge)
      && hugeShards.length === 0, `${huge} | ${hugeShards.join('; ')}`);
  await shot(page, 'error-too-large');
  await context.close();
  await browser.close();
}

// No other site may frame the page (frame-ancestors 'none', sent by the server).
{
  const browser = await launch(false);
  const { context, page } = await newPage(browser);
  const resp = await page.goto(url);
  const csp = resp.headers()['content-security-policy'] || '';
  await page.goto('about:blank');
  await page.setContent(`<iframe id="f" src="${url}"></iframe>`);
  await page.waitForTimeout(3000);
  const framed = page.frames().find((f) => f !== page.mainFrame());
  const inside = framed ? await framed.$('#bundle').catch(() => null) : null;
  check('another page cannot frame the app (frame-ancestors \'none\')', /frame-ancestors 'none'/.test(csp) && inside === null,
    `csp "${csp}", framed url ${framed && framed.url()}`);
  await context.close();
  await browser.close();
}
{
  const browser = await launch(false);
  const { context, page } = await newPage(browser);
  await page.goto(url);
  await loadBundle(page, 'tiny');
  await page.waitForSelector('#phase.ready, #load-error', { timeout: LONG });
  const runsOn = (await page.$('#runs-on')) ? await page.textContent('#runs-on') : await page.textContent('#load-error');
  check('without WebGPU the page loads on the CPU path', /^Runs on: cpu \((simd128|relaxed-simd)/.test(runsOn) && /no GPU adapter/.test(runsOn), runsOn);
  // The default protocol (auto) answers a model this small extractively: the reader's span,
  // no token generated, the native engine's answer.
  if (nativeAuto) {
    const turn = await ask(page, question);
    const action = await turn.locator('.answer-view').getAttribute('data-action');
    const tokens = await turn.locator('pre.raw').evaluateAll((els) => els.map((e) => Number(e.dataset.tokens)));
    const shown = (await turn.locator('.final-answer').textContent()).trim();
    check('by default a small model answers extractively, with the native engine\'s answer and no token generated',
      action === nativeAuto.final_action && nativeAuto.mode === 'extractive' && tokens.every((t) => t === 0)
        && shown.startsWith(nativeAuto.answer.trim()),
      `${action} ${JSON.stringify(tokens)} ${JSON.stringify(shown)} vs ${nativeAuto.mode} ${nativeAuto.final_action} ${JSON.stringify(nativeAuto.answer)}`);
  }
  await context.close();
  await browser.close();
}
{
  const browser = await launch(false);
  const { context, page } = await newPage(browser);
  await page.goto(gpuUrl);
  await loadBundle(page, 'tiny');
  await page.waitForSelector('#load-error', { timeout: 120_000 });
  const err = await page.textContent('#load-error');
  check('?backend=gpu without WebGPU says so plainly', /can't run Lorekeeper/.test(err) && /WebGPU/.test(err), err);
  await shot(page, 'error-no-webgpu');
  await context.close();
  await browser.close();
}

// 8. Offline: after one online visit the service worker has the app shell, so the page reopens
//    with the network cut and answers from the cached bundle; on this server, which sends no
//    COOP/COEP, the service worker's headers make the reopened page cross-origin isolated.
{
  const browser = await launch(true);
  const { context, page } = await newPage(browser);
  await page.goto(url);
  await loadBundle(page, 'tiny');
  await page.waitForSelector('#phase.ready', { timeout: LONG });
  await page.waitForSelector('#storage', { timeout: 10_000 });
  const storage = await page.textContent('#storage');
  check('the page asks for persistent storage and says what the browser granted',
    /^Storage: (persistent|best effort)/.test(storage), storage);
  const before = await page.evaluate(() => self.crossOriginIsolated);
  await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  await context.setOffline(true);
  await page.reload();
  await page.waitForSelector('#phase.ready', { timeout: LONG });
  const offline = await page.textContent('#loaded');
  check('with the network cut, the page reopens and loads the bundle from the cache',
    offline.includes("from this browser's cache"), offline);
  await setSettings(page);
  sameRounds('offline, the question gets the native engine\'s tokens', await rawRounds(await ask(page, question)));
  const after = await page.evaluate(() => self.crossOriginIsolated);
  check('the service worker makes the page cross-origin isolated where the host sends no COOP/COEP',
    before === false && after === true, `first visit ${before}, reopened ${after}`);
  await context.close();
  await browser.close();
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
