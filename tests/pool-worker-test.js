// One CPU pool thread for the threaded browser tests (tests/tests/web_threads.rs): the test
// posts its wasm module and shared memory; this worker instantiates the module on that memory
// (the test runner serves its glue as /wasm-bindgen-test.js) and runs the pool's loop.
import { initSync, pool_worker_entry } from '/wasm-bindgen-test.js';
self.onmessage = ({ data: [module, memory] }) => {
  self.onmessage = null;
  initSync({ module, memory });
  pool_worker_entry();
};
