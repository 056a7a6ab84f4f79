// Starts the engine worker's wasm (wasm-bindgen "no-modules" output, loaded same-origin).
importScripts('./worker.js');
wasm_bindgen({ module_or_path: './worker_bg.wasm' });
