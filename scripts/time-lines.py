#!/usr/bin/env python3
"""Passes the wasm-bindgen-test runner's output through and times each test.

    cargo test --target wasm32-unknown-unknown ... | python3 scripts/time-lines.py OUT.tsv

The runner prints `Invoking test: NAME` when a test starts and `test NAME ... ok|FAILED` when it
ends, one test at a time; OUT.tsv gets `NAME<TAB>SECONDS` per finished test.
"""
import re
import sys
import time

out = open(sys.argv[1], "w", encoding="utf-8")
started = {}
for line in sys.stdin:
    sys.stdout.write(line)
    sys.stdout.flush()
    now = time.monotonic()
    m = re.search(r"Invoking test: (\S+)", line)
    if m:
        started[m.group(1)] = now
        continue
    m = re.match(r"\s*test (\S+) \.\.\. (ok|FAILED|ignored)", line)
    if m and m.group(1) in started:
        out.write(f"{m.group(1)}\t{now - started.pop(m.group(1)):.2f}\n")
        out.flush()
