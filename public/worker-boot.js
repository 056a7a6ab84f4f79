// Starts the engine worker's wasm (wasm-bindgen "no-modules" output, loaded same-origin). Where
// the page is cross-origin isolated (SharedArrayBuffer allowed) and the site carries the
// threaded build (scripts/build-threads.sh: worker-mt.js), that one runs, with a CPU pool of
// Web Workers; otherwise the stable single-threaded build. Its exports stay reachable as
// `self.lorekeeperWasm` (scripts/soak-page.mjs reads the size of its memory).
let threaded = false;
if (self.crossOriginIsolated) {
  try {
    importScripts('./worker-mt.js');
    threaded = true;
  } catch (e) {
    // No threaded build on this site: the stable one below.
  }
}
if (threaded) {
  wasm_bindgen({ module_or_path: './worker-mt_bg.wasm' }).then((w) => { self.lorekeeperWasm = w; });
} else {
  importScripts('./worker.js');
  wasm_bindgen({ module_or_path: './worker_bg.wasm' }).then((w) => { self.lorekeeperWasm = w; });
}
