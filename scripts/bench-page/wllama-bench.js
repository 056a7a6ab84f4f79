// wllama 3.8.1 (llama.cpp in wasm) on the benchmark prompt: window.benchWllama({threads,
// prompt, gen, runs}) loads ../model.gguf on the CPU (n_gpu_layers 0; threads: 1, or 0 for all
// of navigator.hardwareConcurrency), runs `runs` greedy raw completions of `gen` tokens
// (ignore_eos, no prompt cache) and returns llama.cpp's own timings per run.
import { Wllama } from './esm/index.js';

window.benchWllama = async ({ threads, prompt, gen, runs }) => {
  const n = threads > 0 ? threads : navigator.hardwareConcurrency;
  const w = new Wllama({ default: new URL('esm/wasm/wllama.wasm', location.href).href },
    { suppressNativeLog: true });
  await w.loadModelFromUrl(new URL('../model.gguf', location.href).href,
    { n_threads: n, n_gpu_layers: 0, n_ctx: 2048, n_batch: 512, n_ubatch: 512 });
  const out = [];
  for (let i = 0; i < runs; i++) {
    const r = await w.createCompletion({
      prompt, max_tokens: gen, temperature: 0, ignore_eos: true, cache_prompt: false, stream: false,
    });
    out.push(r.timings);
  }
  const info = { threads: w.getNumThreads(), multithread: w.isMultithread(), isolated: self.crossOriginIsolated };
  await w.exit();
  return { info, runs: out };
};
