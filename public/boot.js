// Starts the page's wasm (a file, not an inline script, so the Content-Security-Policy can
// forbid inline scripts).
import init from './lorekeeper-app.js';
init({ module_or_path: './lorekeeper-app_bg.wasm' });

// The service worker (sw.js) keeps the app shell for offline use and adds cross-origin
// isolation where the host sends no COOP/COEP headers; the page works without it.
if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('./sw.js').catch((e) => console.warn('lorekeeper: no service worker:', e));
}
