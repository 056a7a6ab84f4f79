#!/usr/bin/env python3
"""Serves a built Lorekeeper site (dist/) on 127.0.0.1 for the reader or the browser test.

    python3 tests/web-app/serve.py DIR [--port 8080] [--throttle PATH_PART=BYTES_PER_S]
        [--cut PATH_PART=BYTES] [--log FILE] [--isolate]

Static files only, as any static host would serve them: correct MIME types (application/wasm),
no-cache revalidation for HTML/JS/JSON, byte ranges (`Range: bytes=N-` / `N-M`, answered with
206), and `Content-Security-Policy: frame-ancestors 'none'` (no other site may frame the page;
a meta CSP cannot say this). --throttle slows responses whose path contains PATH_PART (the
browser test uses it to photograph a download in progress). --cut breaks off every response
that starts at byte 0 of a file whose path contains PATH_PART after BYTES bytes (and half a
second), as a dropped connection would (the browser test checks that downloads resume with a range; starting over
can never succeed there). --log appends `PATH RANGE` for every GET to FILE. --isolate sends COOP/COEP (`crossOriginIsolated`: shared memory, so
wasm threads; wllama's threaded build needs it).
"""
import argparse
import functools
import http.server
import os
import re
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
    cut = {}
    log = None
    isolate = False

    def do_GET(self):
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{self.path} {self.headers.get('Range', '')}\n")
        super().do_GET()

    def send_head(self):
        """A file's head as the base class sends it, or for `Range: bytes=A-[B]` a 206 with the
        file positioned at A (the body then stops at B)."""
        self._left = None
        self._start = 0
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "").strip())
        path = self.translate_path(self.path)
        if not m or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        start = int(m.group(1))
        end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        if start >= size or end < start:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        f = open(path, "rb")
        f.seek(start)
        self._start = start
        self._left = end - start + 1
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(self._left))
        self.end_headers()
        return f

    def end_headers(self):
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Security-Policy", "frame-ancestors 'none'")
        if self.isolate:
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        if not self.path.split("?")[0].endswith(".bin"):
            self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def copyfile(self, source, outputfile):
        left = getattr(self, "_left", None)
        cut = next((n for p, n in self.cut.items() if p in self.path), None)
        if cut is not None and getattr(self, "_start", 0) == 0:
            # Part of the body, then, a moment later, the connection drops. The pause lets the
            # part reach the page before the break does, as on a real network: a browser that
            # sees the close in the same read may drop what came with it (a CI run saw every
            # cut transfer arrive empty, so no range was ever asked for).
            outputfile.write(source.read(cut if left is None else min(cut, left)))
            outputfile.flush()
            time.sleep(0.5)
            self.close_connection = True
            return
        if left is not None:
            while left > 0:
                buf = source.read(min(left, 1 << 16))
                if not buf:
                    break
                outputfile.write(buf)
                left -= len(buf)
            return
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
    ap.add_argument("--cut", action="append", default=[], metavar="PATH_PART=BYTES")
    ap.add_argument("--log", metavar="FILE", help="append `PATH RANGE` for every GET")
    ap.add_argument("--isolate", action="store_true", help="send COOP/COEP (cross-origin isolation)")
    a = ap.parse_args()
    Handler.isolate = a.isolate
    Handler.log = a.log
    if not os.path.isfile(os.path.join(a.dir, "index.html")):
        sys.exit(f"serve.py: {a.dir} has no index.html (run `trunk build --release` first)")
    for t in a.throttle:
        part, _, rate = t.partition("=")
        Handler.throttle[part] = int(rate)
    for t in a.cut:
        part, _, n = t.partition("=")
        Handler.cut[part] = int(n)
    handler = functools.partial(Handler, directory=a.dir)
    with http.server.ThreadingHTTPServer(("127.0.0.1", a.port), handler) as srv:
        print(f"Lorekeeper is served at http://127.0.0.1:{srv.server_address[1]}/", flush=True)
        srv.serve_forever()


if __name__ == "__main__":
    main()
