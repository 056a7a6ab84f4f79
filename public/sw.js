// Lorekeeper's service worker: the app shell offline, and cross-origin isolation on any host.
//
// 1. Offline: on install it keeps the shell (the page, its scripts, wasm and styles, the bundle
//    list) in a versioned cache. Shell requests go to the network first (so a rebuilt site is
//    seen at once) and fall back to the cache when the network fails, so a reader who loaded
//    the page once can reopen it offline and ask questions. Bundle shards are not touched: the
//    engine worker keeps and verifies them in its own cache (lorekeeper-bundles-v1).
// 2. Isolation: a static host that cannot send COOP/COEP headers still gets them on the
//    documents and scripts this worker serves, so from the second visit on the page is
//    `crossOriginIsolated` and the engine's threaded build can run (the pattern of npm
//    `coi-serviceworker`). A response that already carries the headers is left as it is.
// 3. Framing: a document it serves without a Content-Security-Policy header gets
//    `frame-ancestors 'none'` (and `X-Frame-Options: DENY` for older browsers), so no other
//    site can frame the page on a host that cannot send headers (a meta CSP cannot say this).
//
// Bump VERSION when the list below changes; activation deletes every other shell cache.
const VERSION = 'v1';
const SHELL = `lorekeeper-shell-${VERSION}`;
const FILES = [
  './', './index.html', './boot.js', './style.css',
  './lorekeeper-app.js', './lorekeeper-app_bg.wasm',
  './worker-boot.js', './worker.js', './worker_bg.wasm',
  './pool-worker.js', './bundles/index.json',
];
// The threaded build is optional (scripts/build-threads.sh adds it).
const OPTIONAL = ['./worker-mt.js', './worker-mt_bg.wasm'];

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(SHELL);
    await cache.addAll(FILES.map((f) => new Request(f, { cache: 'no-cache' })));
    await Promise.all(OPTIONAL.map(async (f) => {
      try {
        const r = await fetch(f, { cache: 'no-cache' });
        if (r.ok) await cache.put(f, r);
      } catch (e) { /* absent: the stable build runs */ }
    }));
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const k of await caches.keys()) {
      if (k.startsWith('lorekeeper-shell-') && k !== SHELL) await caches.delete(k);
    }
    await self.clients.claim();
  })());
});

function isolated(resp, document) {
  if (resp.status === 0) return resp;
  const headers = new Headers(resp.headers);
  let changed = false;
  if (!headers.get('Cross-Origin-Embedder-Policy')) {
    headers.set('Cross-Origin-Opener-Policy', 'same-origin');
    headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
    headers.set('Cross-Origin-Resource-Policy', 'same-origin');
    changed = true;
  }
  if (document && !headers.get('Content-Security-Policy')) {
    headers.set('Content-Security-Policy', "frame-ancestors 'none'");
    headers.set('X-Frame-Options', 'DENY');
    changed = true;
  }
  if (!changed) return resp;
  return new Response(resp.body, { status: resp.status, statusText: resp.statusText, headers });
}

self.addEventListener('fetch', (event) => {
  const req = event.request;
  const url = new URL(req.url);
  // Other sites, non-GET requests and bundle files (the engine's own cache) pass through.
  if (req.method !== 'GET' || url.origin !== self.location.origin) return;
  const path = url.pathname;
  if (path.includes('/bundles/') && !path.endsWith('/bundles/index.json')) return;
  event.respondWith((async () => {
    const cache = await caches.open(SHELL);
    // The page's own address may carry ?backend=… or ?threads=…: the cached page answers it.
    const key = req.mode === 'navigate' ? './' : req;
    try {
      const resp = await fetch(req);
      if (resp.ok) await cache.put(key, resp.clone());
      return isolated(resp, req.mode === 'navigate');
    } catch (e) {
      const hit = await cache.match(key, { ignoreSearch: req.mode === 'navigate' });
      if (hit) return isolated(hit, req.mode === 'navigate');
      throw e;
    }
  })());
});
