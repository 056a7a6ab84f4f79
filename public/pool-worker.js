// One thread of the engine's CPU pool (threaded build only): the engine worker posts its wasm
// module and shared memory; this worker instantiates the module on that memory and runs the
// pool's loop (engine/src/cpu/pool.rs, `pool_worker_entry`), which never returns.
importScripts('./worker-mt.js');
self.onmessage = ({ data: [module, memory] }) => {
  self.onmessage = null;
  wasm_bindgen.initSync({ module, memory });
  wasm_bindgen.pool_worker_entry();
};
