#!/usr/bin/env python3
"""Serves a built Lorekeeper site (dist/) on 127.0.0.1 for the reader or the browser test.

    python3 tests/web-app/serve.py DIR [--port 8080] [--throttle PATH_PART=BYTES_PER_S] [--isolate]

Static files only, as any static host would serve them: correct MIME types (application/wasm),
no-cache revalidation for HTML/JS/JSON. --throttle slows responses whose path contains
PATH_PART (the browser test uses it to photograph a download in progress). --isolate sends
COOP/COEP (`crossOriginIsolated`: shared memory, so wasm threads; wllama's threaded build needs
it).
"""
import argparse
import functools
import http.server
import os
import sys
import time


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".js": "text/javascript",
        ".json": "application/json",
        ".bin": "application/octet-stream",
    }
    throttle = {}
    isolate = False

    def end_headers(self):
        if self.isolate:
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        if not self.path.split("?")[0].endswith(".bin"):
            self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def copyfile(self, source, outputfile):
        rate = next((r for p, r in self.throttle.items() if p in self.path), None)
        if rate is None:
            return super().copyfile(source, outputfile)
        step = max(1, rate // 20)
        while True:
            buf = source.read(step)
            if not buf:
                break
            outputfile.write(buf)
            outputfile.flush()
            time.sleep(0.05)

    def log_message(self, fmt, *args):
        if os.environ.get("LOREKEEPER_SERVE_LOG"):
            super().log_message(fmt, *args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--throttle", action="append", default=[], metavar="PATH_PART=BYTES_PER_S")
    ap.add_argument("--isolate", action="store_true", help="send COOP/COEP (cross-origin isolation)")
    a = ap.parse_args()
    Handler.isolate = a.isolate
    if not os.path.isfile(os.path.join(a.dir, "index.html")):
        sys.exit(f"serve.py: {a.dir} has no index.html (run `trunk build --release` first)")
    for t in a.throttle:
        part, _, rate = t.partition("=")
        Handler.throttle[part] = int(rate)
    handler = functools.partial(Handler, directory=a.dir)
    with http.server.ThreadingHTTPServer(("127.0.0.1", a.port), handler) as srv:
        print(f"Lorekeeper is served at http://127.0.0.1:{srv.server_address[1]}/", flush=True)
        srv.serve_forever()


if __name__ == "__main__":
    main()
