// Photographs the demo bundle in headless Chromium (WebGPU on SwiftShader): loads it, asks one
// question, saves a screenshot. With ./run.sh serving the site:
//   node scripts/screenshot-demo.mjs http://127.0.0.1:8080/ docs/screenshots/demo-abstention.png "What is the capital of France?"
// Prints the load line (size, time) and the answer's text.
import { chromium } from 'playwright-core';
const [url, out, q] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless=new','--no-sandbox','--disable-background-networking','--disable-component-update','--disable-sync','--no-first-run','--disable-quic','--enable-unsafe-webgpu'] });
const page = await (await browser.newContext({ viewport: { width: 1360, height: 900 } })).newPage();
page.on('console', m => { if (m.type() !== 'log') console.log('[page]', m.type(), m.text()); });
await page.goto(url);
await page.waitForSelector('#bundle');
await page.selectOption('#bundle', 'alice-smollm2'); await page.click('#load');
await page.waitForSelector('#phase.ready', { timeout: 900000 });
console.log(await page.textContent('#loaded'));
await page.fill('#question', q); await page.click('#ask');
await page.waitForSelector('.answer-view', { timeout: 900000 });
await page.screenshot({ path: out });
console.log((await page.textContent('.turns')).slice(0, 400));
await browser.close();
