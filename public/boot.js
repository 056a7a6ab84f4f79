// Starts the page's wasm (a file, not an inline script, so the Content-Security-Policy can
// forbid inline scripts).
import init from './lorekeeper-app.js';
init({ module_or_path: './lorekeeper-app_bg.wasm' });
