#!/usr/bin/env python3
"""Validate a Lorekeeper evaluation question set (JSONL) against its source text.

Usage:
    python3 scripts/check_questions.py eval/alice.jsonl TEXTFILE [--strip-commentary]
                                       [--min-answerable N]

Examples:
    python3 scripts/check_questions.py eval/alice.jsonl \
        ~/.cache/lorekeeper/assets/texts/alice29.txt
    python3 scripts/check_questions.py eval/hlm.jsonl \
        ~/.cache/lorekeeper/assets/texts/340-脂砚斋重批红楼梦.txt --strip-commentary

Question format (one JSON object per line):
    {"id": "alice-01", "question": "...", "gold": ["verbatim passage", ...],
     "answers": ["short answer", "alias", ...], "chapter": "CHAPTER II"}
Unanswerable questions have "gold": [], "answers": [] and "unanswerable": true
("chapter" is optional for them and may be null).
Optional field "note": free-text justification, e.g. for an answer alias that
does not literally occur in the gold passages (turns that warning into a note).

Text preparation (mirrors what the engine is expected to index):
  1. Decode as UTF-8 (a BOM is tolerated); CRLF/CR -> LF.
  2. Project Gutenberg header/footer: if a line containing "*** START OF" exists,
     everything up to and including it is dropped; if a line containing
     "*** END OF" exists, it and everything after it are dropped.  Files without
     the markers (e.g. alice29.txt, the Millennium Fulcrum 2.9 edition) are used
     whole.
  3. --strip-commentary: remove every 【...】 span (inline 脂批 commentary).
     Spans are removed innermost-first and repeatedly, so nested brackets are
     removed entirely together with the enclosing span.  After that, any
     unbalanced bracket left over is handled as follows and reported:
       * a stray 】 (closing bracket without an opener) - only the bracket
         character is deleted (the surrounding text is kept, because we cannot
         tell where the lost opener was);
       * a stray 【 (opener that is never closed) - the bracket and the rest of
         its line (paragraph) are deleted, since commentary never spans
         paragraphs in practice.
  4. Whitespace: every run of whitespace (incl. newlines and U+3000 ideographic
     space) is collapsed to a single ASCII space.  Gold strings are normalised the
     same way.  For gold strings containing CJK characters a second comparison
     with ALL whitespace removed (in both text and gold) is also accepted, because
     Chinese text may be broken across lines mid-sentence.

Checks (errors -> non-zero exit):
  * valid JSON object per line; required fields and types; unique ids
  * answerable: 1-3 gold passages, >= 1 answer; unanswerable: gold == answers == []
  * every gold passage occurs in the prepared text
  * gold length: 20-200 characters (non-CJK) / 8-120 CJK-text characters
    (whitespace excluded); gold already written with single spaces, no
    leading/trailing whitespace; no 【 or 】 inside gold when stripping
  * at least --min-answerable (default 30) answerable questions
Warnings (do not fail):
  * an answer string that does not occur (case-insensitively) in the item's gold
    passages (a "note" field downgrades it to a note)
  * the chapter in which a gold passage was found differs from the declared
    "chapter" (chapters detected from headings "CHAPTER IV" / "第四回")
"""

import argparse
import json
import re
import sys

WS_RE = re.compile(r"\s+")
CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
CHAPTER_LINE_RE = re.compile(
    r"^[ \t\u3000]*(CHAPTER [IVXLC]+|(?:ACT|Act) [IVX0-9]+|第[零〇一二三四五六七八九十百千两0-9]+回)(?=[.]?(?:[ \t\u3000]|$))",
    re.MULTILINE,
)
INNER_COMMENT_RE = re.compile(r"【[^【】]*】")


def collapse(s):
    return WS_RE.sub(" ", s).strip()


def nows(s):
    return WS_RE.sub("", s)


def has_cjk(s):
    return CJK_RE.search(s) is not None


def strip_gutenberg(text):
    """Return (text, description)."""
    lines = text.split("\n")
    start = end = None
    for i, line in enumerate(lines):
        u = line.upper()
        if start is None and "*** START OF" in u:
            start = i
        elif "*** END OF" in u:
            end = i
            break
    if start is None and end is None:
        return text, "no Gutenberg *** START/END markers found; using whole file"
    s = 0 if start is None else start + 1
    e = len(lines) if end is None else end
    desc = "Gutenberg markers: START %s, END %s; kept lines %d-%d" % (
        "line %d" % (start + 1) if start is not None else "absent",
        "line %d" % (end + 1) if end is not None else "absent",
        s + 1,
        e,
    )
    return "\n".join(lines[s:e]), desc


def strip_commentary(text):
    """Remove 【...】 spans. Return (text, stats dict)."""
    stats = {"spans": 0, "passes": 0, "stray_close": 0, "stray_open": 0}
    while True:
        text, n = INNER_COMMENT_RE.subn("", text)
        if n == 0:
            break
        stats["spans"] += n
        stats["passes"] += 1
    if "】" in text:
        stats["stray_close"] = text.count("】")
        text = text.replace("】", "")
    if "【" in text:
        stats["stray_open"] = text.count("【")
        text = re.sub(r"【[^\n]*", "", text)
    return text, stats


def split_chapters(text):
    """Return list of (label, collapsed_text, nows_text) by chapter headings."""
    # Labels in capitals: the Gutenberg Hamlet prints `ACT I.` but `Act II.`.
    marks = [(m.start(), m.group(1).upper()) for m in CHAPTER_LINE_RE.finditer(text)]
    chapters = []
    if not marks:
        return chapters
    if marks[0][0] > 0:
        marks.insert(0, (0, "(front matter)"))
    for i, (pos, label) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        seg = text[pos:end]
        chapters.append((label, collapse(seg), nows(seg)))
    return chapters


def declared_chapters(ch):
    if not ch:
        return []
    return [p.strip() for p in re.split(r"[,，;；、/|]+", ch) if p.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions", help="JSONL question file")
    ap.add_argument("textfile", help="source text (UTF-8)")
    ap.add_argument("--strip-commentary", action="store_true",
                    help="remove 【...】 commentary spans before matching")
    ap.add_argument("--min-answerable", type=int, default=30,
                    help="minimum number of answerable questions (default 30)")
    args = ap.parse_args()

    qpath = args.questions
    errors = []
    warnings = []
    notes = []
    messages = []  # (lineno, order, text) - printed sorted by line number

    def err(lineno, qid, msg):
        errors.append(msg)
        messages.append((lineno, len(messages), "%s:%s [%s] ERROR: %s" % (qpath, lineno, qid, msg)))

    def warn(lineno, qid, msg):
        warnings.append(msg)
        messages.append((lineno, len(messages), "%s:%s [%s] WARNING: %s" % (qpath, lineno, qid, msg)))

    def note_(lineno, qid, msg):
        notes.append(msg)
        messages.append((lineno, len(messages), "%s:%s [%s] NOTE: %s" % (qpath, lineno, qid, msg)))

    # ---- load text ----
    try:
        with open(args.textfile, "rb") as f:
            raw = f.read()
    except OSError as e:
        print("%s: ERROR: cannot read text file %s: %s" % (qpath, args.textfile, e))
        return 2
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        print("%s: ERROR: text file %s is not valid UTF-8: %s" % (qpath, args.textfile, e))
        return 2
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    print("text: %s (%d chars after decoding)" % (args.textfile, len(text)))
    text, gdesc = strip_gutenberg(text)
    print("  " + gdesc)
    if args.strip_commentary:
        text, st = strip_commentary(text)
        print("  commentary: removed %d 【…】 spans in %d pass(es) (>1 pass means nesting); "
              "stray 】 removed: %d; stray 【 (rest of line removed): %d"
              % (st["spans"], st["passes"], st["stray_close"], st["stray_open"]))
    else:
        n_open = text.count("【")
        if n_open:
            print("  note: text contains %d 【 brackets but --strip-commentary not given" % n_open)
    full_ws = collapse(text)
    full_nows = nows(text)
    chapters = split_chapters(text)
    print("  prepared text: %d chars (whitespace collapsed); %d chapter headings detected"
          % (len(full_ws), sum(1 for c in chapters if c[0] != "(front matter)")))

    # ---- load questions ----
    try:
        with open(qpath, "r", encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError) as e:
        print("%s: ERROR: cannot read question file: %s" % (qpath, e))
        return 2

    seen_ids = {}
    n_total = n_answerable = n_unanswerable = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            err(lineno, "?", "invalid JSON: %s" % e)
            continue
        if not isinstance(q, dict):
            err(lineno, "?", "line is not a JSON object")
            continue
        n_total += 1
        qid = q.get("id")
        if not isinstance(qid, str) or not qid.strip():
            err(lineno, "?", "missing or empty string field 'id'")
            qid = "?"
        elif qid in seen_ids:
            err(lineno, qid, "duplicate id (first seen on line %d)" % seen_ids[qid])
        else:
            seen_ids[qid] = lineno

        if not isinstance(q.get("question"), str) or not q["question"].strip():
            err(lineno, qid, "missing or empty string field 'question'")
        for fld in ("gold", "answers"):
            if fld not in q:
                err(lineno, qid, "missing field '%s'" % fld)
            elif not isinstance(q[fld], list) or not all(isinstance(x, str) for x in q[fld]):
                err(lineno, qid, "field '%s' must be a list of strings" % fld)
        if not isinstance(q.get("gold"), list) or not isinstance(q.get("answers"), list):
            continue
        gold = q["gold"]
        answers = q["answers"]
        unans = q.get("unanswerable", False)
        if not isinstance(unans, bool):
            err(lineno, qid, "'unanswerable' must be true/false")
            unans = bool(unans)
        chapter = q.get("chapter")
        note = q.get("note")

        if unans:
            n_unanswerable += 1
            if gold or answers:
                err(lineno, qid, "unanswerable question must have empty 'gold' and 'answers'")
            if chapter is not None and not isinstance(chapter, str):
                err(lineno, qid, "'chapter' must be a string or null")
            continue

        n_answerable += 1
        if "chapter" not in q or not isinstance(chapter, str) or not chapter.strip():
            err(lineno, qid, "answerable question needs a non-empty string 'chapter'")
            chapter = None
        if not 1 <= len(gold) <= 3:
            err(lineno, qid, "answerable question needs 1-3 gold passages (has %d)" % len(gold))
        if not answers:
            err(lineno, qid, "answerable question needs at least one entry in 'answers'")
        for a in answers:
            if not a.strip():
                err(lineno, qid, "empty answer string")

        found_chapters = []
        for gi, g in enumerate(gold, 1):
            gshow = g if len(g) <= 60 else g[:57] + "..."
            if g != collapse(g):
                err(lineno, qid, "gold #%d is not whitespace-normalised (use single spaces, "
                    "no leading/trailing/newline whitespace): %r" % (gi, gshow))
            cjk = has_cjk(g)
            if cjk:
                glen = len(nows(g))
                if not 8 <= glen <= 120:
                    err(lineno, qid, "gold #%d has %d characters (CJK gold must be 8-120): %r"
                        % (gi, glen, gshow))
            else:
                glen = len(collapse(g))
                if not 20 <= glen <= 200:
                    err(lineno, qid, "gold #%d has %d characters (must be 20-200): %r"
                        % (gi, glen, gshow))
            if args.strip_commentary and ("【" in g or "】" in g):
                err(lineno, qid, "gold #%d contains a commentary bracket 【/】: %r" % (gi, gshow))
            gc = collapse(g)
            if gc and gc in full_ws:
                where = [c[0] for c in chapters if gc in c[1]]
            elif cjk and nows(g) and nows(g) in full_nows:
                where = [c[0] for c in chapters if nows(g) in c[2]]
            else:
                hint = ""
                if not cjk and nows(g) and nows(g) in full_nows:
                    hint = " (it matches only if all whitespace is removed - check spacing)"
                err(lineno, qid, "gold #%d not found in text%s: %r" % (gi, hint, gshow))
                continue
            found_chapters.append((gi, where))

        # chapter consistency (warning only)
        decl = declared_chapters(chapter)
        if decl and chapters:
            for gi, where in found_chapters:
                if where and not any(w in decl for w in where):
                    warn(lineno, qid, "gold #%d found in %s but 'chapter' is %r"
                         % (gi, "/".join(where), chapter))

        # answers vs gold (warning only)
        gold_ws = " ".join(collapse(g) for g in gold).casefold()
        gold_nows = nows(" ".join(gold)).casefold()
        for a in answers:
            ac = collapse(a).casefold()
            if not ac:
                continue
            if ac in gold_ws or nows(ac) in gold_nows:
                continue
            msg = "answer %r does not occur in the gold passages" % a
            if isinstance(note, str) and note.strip():
                note_(lineno, qid, "%s (justified: %s)" % (msg, note))
            else:
                warn(lineno, qid, msg)

    if n_answerable < args.min_answerable:
        msg = "only %d answerable questions (need >= %d)" % (n_answerable, args.min_answerable)
        errors.append(msg)
        messages.append((len(lines) + 1, len(messages), "%s: ERROR: %s" % (qpath, msg)))

    for _, _, m in sorted(messages):
        print(m)
    print("%s: %d questions (%d answerable, %d unanswerable): %d error(s), %d warning(s), %d note(s)"
          % (qpath, n_total, n_answerable, n_unanswerable, len(errors), len(warnings), len(notes)))
    if errors:
        print("FAILED: %s" % qpath)
        return 1
    print("OK: %s" % qpath)
    return 0


if __name__ == "__main__":
    sys.exit(main())
