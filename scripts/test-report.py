#!/usr/bin/env python3
"""The timing table printed at the end of `.ci/run` and `./test.sh`.

    test-report.py PHASES_FILE TOTAL_SECONDS START_EPOCH

PHASES_FILE holds `name<TAB>seconds<TAB>status<TAB>free KiB` lines (scripts/phases.sh): the
disk space left after each phase is printed beside its time (a full disk fails builds late).
The slowest tests come from cargo nextest's JUnit file (target/nextest/default/junit.xml, native tests) and from
target/browser-tests.tsv (`name<TAB>seconds`, the browser tests, written by
scripts/time-lines.py from the wasm-bindgen-test runner's output).
"""
import os
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mmss(s):
    s = int(round(s))
    return f"{s // 60}:{s % 60:02d}"


def main():
    phases_file, total, start = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    rows = []
    if os.path.exists(phases_file):
        for line in open(phases_file, encoding="utf-8"):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                free = parts[3] if len(parts) > 3 and parts[3].isdigit() else ""
                rows.append((parts[0], float(parts[1]), parts[2], free))
    print("\n== timing ==")
    w = max([len(r[0]) for r in rows] + [5])
    print(f"| {'phase':<{w}} | {'time':>7} | status | disk free |")
    print(f"|{'-' * (w + 2)}|{'-' * 9}|--------|-----------|")
    for name, secs, status, free in rows:
        gib = f"{int(free) / (1 << 20):.1f} GiB" if free else ""
        ok = "ok" if status == "0" else "rc " + status
        print(f"| {name:<{w}} | {mmss(secs):>7} | {ok:<6} | {gib:>9} |")
    print(f"| {'total':<{w}} | {mmss(total):>7} |        |           |")

    tests = []
    junit = os.path.join(ROOT, "target/nextest/default/junit.xml")
    # Only this run's files (written after it started).
    if os.path.exists(junit) and os.path.getmtime(junit) >= start:
        for case in ET.parse(junit).iter("testcase"):
            tests.append((float(case.get("time", "0")), f"{case.get('classname')} {case.get('name')}"))
    browser = os.path.join(ROOT, "target/browser-tests.tsv")
    if os.path.exists(browser) and os.path.getmtime(browser) >= start:
        for line in open(browser, encoding="utf-8"):
            name, _, secs = line.rstrip("\n").rpartition("\t")
            if name:
                tests.append((float(secs), f"browser {name}"))
    if tests:
        tests.sort(reverse=True)
        print(f"\n== 15 slowest of {len(tests)} tests (native: nextest, 2 at a time; browser: one at a time) ==")
        for secs, name in tests[:15]:
            print(f"| {secs:8.1f} s | {name}")


if __name__ == "__main__":
    main()
