// Drives scripts/bench-page-arch.sh's pages: ROUNDS rounds, each opening every build's page in
// turn in one headless Chromium (a fresh tab each: the model is loaded again), reading the
// `lorekeeper-bench {json}` line the page logs. Prints one JSON object: per build, its rounds
// and the median decode tok/s.
//
//   node scripts/bench-page-arch.mjs ROUNDS "NAME …" URL …
import { launchChromium, benchAnswer, LONG } from './page-driver.mjs';

const [roundsArg, namesArg, ...urls] = process.argv.slice(2);
const names = namesArg.split(' ');
const rounds = Number(roundsArg);
if (!(rounds > 0) || names.length !== urls.length) {
  console.error('usage: bench-page-arch.mjs ROUNDS "NAME …" URL …');
  process.exit(2);
}
const browser = await launchChromium(['--enable-unsafe-webgpu']);
const runs = urls.map(() => []);
try {
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < urls.length; i++) {
      const page = await browser.newPage();
      page.setDefaultTimeout(LONG);
      const answer = benchAnswer(page);
      await page.goto(urls[i]);
      const res = await answer;
      await page.close();
      if (res.error) throw new Error(`${names[i]}: ${res.error}`);
      console.error(`round ${r + 1} ${names[i]}: ${res.decode_tok_s.toFixed(3)} tok/s (load ${res.load_and_warm_s.toFixed(1)} s)`);
      runs[i].push(res);
    }
  }
} finally {
  await browser.close();
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const out = {};
names.forEach((n, i) => {
  out[n] = { median_tok_s: median(runs[i].map((x) => x.decode_tok_s)), runs: runs[i] };
});
console.log(JSON.stringify(out, null, 1));
