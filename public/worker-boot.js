// Starts the engine worker's wasm (wasm-bindgen "no-modules" output, loaded same-origin). Where
// the page is cross-origin isolated (SharedArrayBuffer allowed), the site carries the threaded
// build (scripts/build-threads.sh: worker-mt.js) and the browser runs relaxed SIMD (which that
// build's 4-bit dot products use: it must validate a module with i8x16.relaxed_swizzle), that
// one runs, with a CPU pool of Web Workers; otherwise the stable single-threaded build. Its
// exports stay reachable as `self.lorekeeperWasm` (scripts/soak-page.mjs reads the size of its
// memory).
const relaxedSimd = WebAssembly.validate(new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 1, 253,
  15, 65, 2, 253, 15, 253, 128, 2, 11,
]));
// Read by the worker to say why it runs one thread (app/src/worker/threads.rs).
self.lorekeeperRelaxedSimd = relaxedSimd;
let threaded = false;
if (self.crossOriginIsolated && relaxedSimd) {
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
