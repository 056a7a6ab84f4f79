//! Corpus ingest: plain text, Markdown and JSONL scripts into [`Segment`]s.
//!
//! Every input is a `(name, bytes)` pair; nothing here touches the file system, so the same code
//! runs natively and in wasm. Before parsing, the bytes are checked in this order:
//!
//! 1. **Binary**: a NUL byte anywhere, or more than 10 % control characters (other than tab, line
//!    feed, carriage return and form feed) in the first 64 KiB, rejects the input naming the file.
//! 2. **Line length**: a line longer than [`IngestOptions::max_line_bytes`] (default 1 MiB) is an
//!    error naming the file and the 1-based line.
//! 3. **UTF-8**: invalid UTF-8 is an error naming the file, the 1-based line and the byte offset.
//!    A leading byte-order mark is dropped.
//!
//! Text and Markdown then lose a Project Gutenberg header and footer (everything up to the
//! `*** START OF …` line and from the `*** END OF …` line on; text without the markers is kept
//! whole) and, with [`IngestOptions::strip_commentary`], every `【…】` span (the commentary of
//! 脂砚斋重批红楼梦). A corpus with no text left is an error.
//!
//! # Structure of plain text and Markdown
//!
//! - **Chapters** start at a heading line: `CHAPTER I`, `Chapter 12`, `CHAPTER II.`, `Chapter One`
//!   (the word `chapter` in any case, then an Arabic, Roman or English-word numeral), with an
//!   optional title on the same line (`CHAPTER I. Down the Rabbit-Hole`) or on the next non-blank
//!   line when that line is a short paragraph of its own (at most 80 characters and 12 words, not
//!   ending in `.`, `,`, `;` or `:`); or Chinese headings `第一回`, `第十二回`, `第1章`, `第三卷`
//!   (第, a numeral, then 回/章/节/卷), title on the same or the next line. In Markdown, ATX
//!   headings (`#` … `######`) also start chapters: the chapter level is the shallowest level that
//!   occurs at least twice (else the shallowest used), so `# Book` over `## Chapter 1`, `## Chapter
//!   2` makes the `##` headings chapters; deeper headings start scenes, shallower ones are
//!   dropped. Text before the first heading belongs to a chapter named after the story.
//! - **Scenes**: a play's scene heading (below), or a line of three or more `*`, `-`, `_`, `~`,
//!   `=` or `#` (spaces allowed, as in `* * *`) starts a new scene. The first scene of a chapter
//!   has no name (`None`); later ones are numbered `"2"`, `"3"`, … or named by their heading.
//! - **Paragraphs** end at blank lines; a line that starts indented (spaces, a tab or an
//!   ideographic space) also starts a new paragraph. Hard-wrapped lines are joined with one space,
//!   without one between two CJK characters, and a word hyphenated across lines keeps its hyphen
//!   but loses the space (`WAISTCOAT-` + `POCKET` → `WAISTCOAT-POCKET`). Runs of whitespace collapse
//!   to one space.
//! - **Dialogue lines** in ASA's script form, `[name="Speaker"] text`, become one segment each
//!   with that speaker.
//! - **Plays and screenplays** in plain text (speaker cues such as `PROSPERO.`, `Ber.`,
//!   `BOATSWAIN. Here, master`, `NAME<TAB>line`, Fountain's `ALICE`) are recognised by
//!   [`super::script`]: each speech becomes a segment with its speaker, `ACT I` / `Actus Primus`
//!   headings start chapters and `SCENE 2` / `Scene I. Elsinore.` headings start scenes. Prose
//!   never reads as a play (the cues must open 30 % of its paragraphs).
//!
//! # JSONL
//!
//! One JSON object per line: `{"story", "chapter", "scene", "speaker", "text"}`. `chapter` (a
//! string or an integer) and `text` (a string) are required; `story` defaults to the file's stem;
//! `scene` and `speaker` are optional (null or absent). Blank lines are skipped; lines whose text
//! is blank are skipped. A line that is not a JSON object, or whose fields have the wrong type, is
//! an error with its line number and field.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{Result, RetrievalError};
use super::script::Cast;

/// The default limit on one line of input: 1 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

/// How many leading bytes the control-character test looks at.
const BINARY_SAMPLE_BYTES: usize = 64 * 1024;

/// Longest line (in characters) taken for a chapter heading.
const MAX_HEADING_CHARS: usize = 100;

/// Longest line (in characters) taken for a chapter title on the line after its heading.
const MAX_TITLE_CHARS: usize = 80;

/// Most words taken for a chapter title on the line after its heading.
const MAX_TITLE_WORDS: usize = 12;

/// The input formats [`ingest`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusFormat {
    /// Plain text (Project Gutenberg and the like).
    Text,
    /// Markdown: plain text plus ATX headings.
    Markdown,
    /// One JSON object per line: `{story, chapter, scene, speaker, text}`.
    Jsonl,
}

impl CorpusFormat {
    /// The format implied by a file name's extension: `.jsonl`/`.ndjson` → JSONL,
    /// `.md`/`.markdown` → Markdown, anything else → plain text.
    pub fn from_name(name: &str) -> Self {
        let ext = name
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "jsonl" | "ndjson" => CorpusFormat::Jsonl,
            "md" | "markdown" => CorpusFormat::Markdown,
            _ => CorpusFormat::Text,
        }
    }
}

/// Options for [`ingest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IngestOptions {
    /// The input format; `None` infers it from the name ([`CorpusFormat::from_name`]).
    pub format: Option<CorpusFormat>,
    /// Longest accepted line in bytes.
    pub max_line_bytes: usize,
    /// Remove `【…】` commentary spans.
    pub strip_commentary: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            format: None,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            strip_commentary: false,
        }
    }
}

/// One unit of story text: a paragraph of prose or one line of dialogue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// The story (the JSONL `story` field, else the input's file stem).
    pub story: String,
    /// The chapter heading (or the story name before the first heading).
    pub chapter: String,
    /// The scene within the chapter, if the input marks scenes.
    pub scene: Option<String>,
    /// Who speaks, for a dialogue line.
    pub speaker: Option<String>,
    /// The text, trimmed, never empty.
    pub text: String,
}

/// Reads one corpus input into segments.
///
/// `name` names the input in errors and gives the default story name (its file stem).
pub fn ingest(name: &str, bytes: &[u8], options: &IngestOptions) -> Result<Vec<Segment>> {
    let text = decode_text(name, bytes, options.max_line_bytes)?;
    let format = options
        .format
        .unwrap_or_else(|| CorpusFormat::from_name(name));
    let story = file_stem(name);
    let segments = match format {
        CorpusFormat::Jsonl => parse_jsonl(name, story, text, options.strip_commentary)?,
        CorpusFormat::Text | CorpusFormat::Markdown => {
            let body = strip_gutenberg(text);
            let body = if options.strip_commentary {
                strip_commentary(body)
            } else {
                Cow::Borrowed(body)
            };
            parse_text(story, &body, format == CorpusFormat::Markdown)
        }
    };
    if segments.is_empty() {
        return Err(RetrievalError::EmptyCorpus(name.to_string()));
    }
    Ok(segments)
}

/// Checks that `bytes` are text (not binary, no line over `max_line_bytes`, valid UTF-8) and
/// returns them as a string without a leading byte-order mark.
pub fn decode_text<'a>(name: &str, bytes: &'a [u8], max_line_bytes: usize) -> Result<&'a str> {
    check_binary(name, bytes)?;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > max_line_bytes {
            return Err(RetrievalError::LineTooLong {
                file: name.to_string(),
                line: i + 1,
                bytes: line.len(),
                limit: max_line_bytes,
            });
        }
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let byte = e.valid_up_to();
        RetrievalError::InvalidUtf8 {
            file: name.to_string(),
            line: bytes[..byte].iter().filter(|&&b| b == b'\n').count() + 1,
            byte,
        }
    })?;
    Ok(text.strip_prefix('\u{feff}').unwrap_or(text))
}

fn check_binary(name: &str, bytes: &[u8]) -> Result<()> {
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(RetrievalError::Binary {
            file: name.to_string(),
            reason: format!("NUL byte at offset {at}"),
        });
    }
    let sample = &bytes[..bytes.len().min(BINARY_SAMPLE_BYTES)];
    let control = sample
        .iter()
        .filter(|&&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c)) || b == 0x7f)
        .count();
    if control * 10 > sample.len() {
        return Err(RetrievalError::Binary {
            file: name.to_string(),
            reason: format!(
                "{control} control characters in the first {} bytes",
                sample.len()
            ),
        });
    }
    Ok(())
}

/// The file name without directories and extension (`books/alice29.txt` → `alice29`).
fn file_stem(name: &str) -> &str {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => base,
    }
}

/// Cuts a Project Gutenberg header (through the `*** START OF …` line) and footer (from the
/// `*** END OF …` line). Text without the markers is returned unchanged.
pub fn strip_gutenberg(text: &str) -> &str {
    let mut start = 0;
    let mut end = text.len();
    let mut offset = 0;
    let mut started = false;
    for line in text.split_inclusive('\n') {
        if !started && is_gutenberg_marker(line, "START OF") {
            start = offset + line.len();
            started = true;
        } else if is_gutenberg_marker(line, "END OF") {
            end = offset;
            break;
        }
        offset += line.len();
    }
    &text[start..end.max(start)]
}

fn is_gutenberg_marker(line: &str, what: &str) -> bool {
    let line = line.trim();
    let Some(rest) = line.strip_prefix("***") else {
        return false;
    };
    let rest = rest.trim_start_matches(['*', ' ']);
    // `get`: the marker's length may fall inside a multi-byte character of the line.
    rest.get(..what.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(what))
}

/// Removes every `【…】` span (nested spans included). An unclosed `【` keeps the rest of the
/// text as it is, so a typo never drops a chapter; a stray `】` is kept.
pub fn strip_commentary(text: &str) -> Cow<'_, str> {
    if !text.contains('【') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut span_start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '【' => {
                if depth == 0 {
                    span_start = i;
                }
                depth += 1;
            }
            '】' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    if depth > 0 {
        out.push_str(&text[span_start..]);
    }
    Cow::Owned(out)
}

/// Whether `c` is a CJK ideograph, kana, Hangul syllable or CJK punctuation (no spaces between).
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x303F   // CJK symbols and punctuation
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3400..=0x4DBF // Extension A
        | 0x4E00..=0x9FFF // Unified ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // Compatibility ideographs
        | 0xFF00..=0xFFEF // Full-width forms
        | 0x20000..=0x2FA1F)
}

/// What a heading starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeadingKind {
    /// `CHAPTER I`, `第一回`: a chapter.
    Chapter,
    /// `ACT I`, `Actus Primus`: a chapter of a play.
    Act,
    /// `SCENE 2`, `Scene II. Elsinore.`: a scene within the chapter or act.
    Scene,
}

/// A heading found on one line.
struct Heading {
    kind: HeadingKind,
    /// The heading as written, whitespace collapsed (`CHAPTER I.`, `第一回`).
    label: String,
    /// A title on the same line, if any.
    title: Option<String>,
}

impl Heading {
    fn name(&self) -> String {
        match &self.title {
            Some(t) => join_heading(&self.label, t),
            None => self.label.clone(),
        }
    }
}

fn join_heading(label: &str, title: &str) -> String {
    let cjk = label.chars().last().is_some_and(is_cjk);
    let punct = label.ends_with(['.', ':', '：', '。']);
    if cjk || punct {
        format!("{label} {title}")
    } else {
        format!("{label}: {title}")
    }
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Recognises `CHAPTER I`, `Chapter 12. Title`, `CHAPTER II.`, `Chapter One: Title`,
/// `第一回 title`, `第1章`; and in plays `ACT 1`, `Act II.`, `Actus Primus.`, `SCENE 2`,
/// `Scene I. Elsinore.`, `SCENE II.--Another part of the island`.
fn parse_chapter_heading(line: &str) -> Option<Heading> {
    let line = collapse_ws(line);
    if line.is_empty() || line.chars().count() > MAX_HEADING_CHARS {
        return None;
    }
    parse_english_heading(&line).or_else(|| parse_chinese_heading(&line))
}

fn parse_english_heading(line: &str) -> Option<Heading> {
    let (word, rest) = line.split_once(' ')?;
    let kind = if word.eq_ignore_ascii_case("chapter") {
        HeadingKind::Chapter
    } else if !word.starts_with(char::is_uppercase) {
        // `act` and `scene` are common words: only capitalised do they head anything.
        return None;
    } else if ["act", "actus"]
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w))
    {
        HeadingKind::Act
    } else if ["scene", "scena", "scoena"]
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w))
    {
        HeadingKind::Scene
    } else {
        return None;
    };
    let numeral_len = rest
        .find(|c: char| !c.is_alphanumeric())
        .unwrap_or(rest.len());
    let numeral = &rest[..numeral_len];
    if !is_numeral(numeral) {
        return None;
    }
    let after = &rest[numeral_len..];
    let punct_len = after
        .find(|c: char| !matches!(c, '.' | ':' | '-' | '—' | '–'))
        .unwrap_or(after.len());
    let (punct, tail) = after.split_at(punct_len);
    if !tail.is_empty() && !tail.starts_with(' ') {
        return None;
    }
    let title = tail.trim();
    // "Chapter one was over" is prose: a title needs a separator or a capital letter.
    if punct.is_empty() && title.starts_with(char::is_lowercase) {
        return None;
    }
    if title.is_empty() && !matches!(punct, "" | "." | ":") {
        return None;
    }
    let kept = punct.trim_end_matches(['-', '—', '–']);
    Some(Heading {
        kind,
        label: format!("{word} {numeral}{kept}"),
        title: (!title.is_empty()).then(|| title.to_string()),
    })
}

fn is_numeral(s: &str) -> bool {
    const WORDS: [&str; 40] = [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "last",
        "final",
        // The Folio's acts and scenes: `Actus Primus. Scoena Prima.`
        "primus",
        "prima",
        "secundus",
        "secunda",
        "tertius",
        "tertia",
        "quartus",
        "quarta",
        "quintus",
        "quinta",
    ];
    !s.is_empty()
        && (s.chars().all(|c| c.is_ascii_digit())
            || s.chars().all(|c| {
                matches!(
                    c.to_ascii_uppercase(),
                    'I' | 'V' | 'X' | 'L' | 'C' | 'D' | 'M'
                )
            })
            || WORDS.iter().any(|w| w.eq_ignore_ascii_case(s)))
}

fn parse_chinese_heading(line: &str) -> Option<Heading> {
    let rest = line.strip_prefix('第')?;
    let numeral_len: usize = rest
        .chars()
        .take_while(|&c| {
            "〇零一二三四五六七八九十百千两".contains(c)
                || c.is_ascii_digit()
                || ('０'..='９').contains(&c)
        })
        .map(char::len_utf8)
        .sum();
    if numeral_len == 0 {
        return None;
    }
    let unit = rest[numeral_len..].chars().next()?;
    if !matches!(unit, '回' | '章' | '节' | '卷') {
        return None;
    }
    let label_len = '第'.len_utf8() + numeral_len + unit.len_utf8();
    let title = line[label_len..]
        .trim_start_matches([' ', ':', '：', '　'])
        .trim();
    Some(Heading {
        kind: HeadingKind::Chapter,
        label: line[..label_len].to_string(),
        title: (!title.is_empty()).then(|| title.to_string()),
    })
}

/// A line that may stand as the title under a heading without one.
fn is_title_line(line: &str) -> bool {
    let t = collapse_ws(line);
    let cjk = t.chars().any(is_cjk);
    let max_chars = if cjk {
        MAX_TITLE_CHARS / 2
    } else {
        MAX_TITLE_CHARS
    };
    !t.is_empty()
        && t.chars().count() <= max_chars
        && t.split(' ').count() <= MAX_TITLE_WORDS
        && !t.ends_with(['.', ',', ';', ':', '。', '，', '；', '：'])
        && parse_chapter_heading(&t).is_none()
        && markdown_heading(&t).is_none()
        && !is_scene_break(&t)
}

/// `## Title` → `(2, "Title")`.
fn markdown_heading(line: &str) -> Option<(usize, String)> {
    let t = line.trim_start();
    let level = t.chars().take_while(|&c| c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    Some((level, collapse_ws(title)))
}

fn is_scene_break(line: &str) -> bool {
    let mut marks = line.chars().filter(|c| !c.is_whitespace());
    let Some(first) = marks.next() else {
        return false;
    };
    matches!(first, '*' | '-' | '_' | '~' | '=' | '#')
        && marks.clone().count() >= 2
        && marks.all(|c| c == first)
}

/// `[name="Alice"] Hello.` → `("Alice", "Hello.")`.
fn script_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix("[name=\"")?;
    let (name, text) = rest.split_once("\"]")?;
    let name = name.trim();
    (!name.is_empty()).then(|| (name, text.trim()))
}

/// Parser state for plain text and Markdown.
struct TextParser<'a> {
    story: &'a str,
    chapter: String,
    scene_no: usize,
    scene: Option<String>,
    /// The speaker of the open paragraph, in a script.
    speaker: Option<String>,
    paragraph: Vec<&'a str>,
    out: Vec<Segment>,
}

impl<'a> TextParser<'a> {
    fn flush(&mut self) {
        if self.paragraph.is_empty() {
            return;
        }
        let text = join_lines(&self.paragraph);
        self.paragraph.clear();
        self.push(text, self.speaker.clone());
    }

    fn push(&mut self, text: String, speaker: Option<String>) {
        if text.is_empty() {
            return;
        }
        self.out.push(Segment {
            story: self.story.to_string(),
            chapter: self.chapter.clone(),
            scene: self.scene.clone(),
            speaker,
            text,
        });
    }

    fn start_chapter(&mut self, name: String) {
        self.flush();
        self.speaker = None;
        self.chapter = name;
        self.scene_no = 1;
        self.scene = None;
    }

    fn start_scene(&mut self, name: Option<String>) {
        self.flush();
        self.speaker = None;
        self.scene_no += 1;
        self.scene = Some(name.unwrap_or_else(|| self.scene_no.to_string()));
    }
}

/// Joins hard-wrapped lines: one space, none between CJK characters, none after a word hyphen.
fn join_lines(lines: &[&str]) -> String {
    let mut out = String::new();
    for line in lines {
        let line = collapse_ws(line);
        if line.is_empty() {
            continue;
        }
        let prev = out.chars().last();
        let next = line.chars().next();
        let glue = match (prev, next) {
            (None, _) => false,
            (Some(p), Some(n)) if is_cjk(p) && is_cjk(n) => false,
            (Some('-'), Some(n)) if n.is_alphabetic() => {
                let mut rev = out.chars().rev();
                rev.next();
                !rev.next().is_some_and(char::is_alphabetic)
            }
            _ => true,
        };
        if glue {
            out.push(' ');
        }
        out.push_str(&line);
    }
    out
}

fn parse_text(story: &str, text: &str, markdown: bool) -> Vec<Segment> {
    let lines: Vec<&str> = text.lines().collect();
    let chapter_level = if markdown {
        markdown_chapter_level(&lines)
    } else {
        None
    };
    // A play's cast list comes before its first act (or chapter).
    let first_act = lines
        .iter()
        .position(|l| parse_chapter_heading(l.trim()).is_some_and(|h| h.kind != HeadingKind::Scene))
        .unwrap_or(0);
    let cast = Cast::detect(&lines, first_act);
    let mut p = TextParser {
        story,
        chapter: story.to_string(),
        scene_no: 1,
        scene: None,
        speaker: None,
        paragraph: Vec::new(),
        out: Vec::new(),
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            p.flush();
            p.speaker = None;
            continue;
        }
        if let (Some(level), Some((l, title))) = (chapter_level, markdown_heading(trimmed)) {
            if l == level {
                p.start_chapter(title);
            } else if l > level {
                p.start_scene(Some(title));
            } else {
                p.flush();
            }
            continue;
        }
        if let Some(heading) = parse_chapter_heading(trimmed) {
            match heading.kind {
                HeadingKind::Scene => p.start_scene(Some(heading.name())),
                // `ACT III. SCENE 1. A room`: the act, then its scene.
                HeadingKind::Act => {
                    match heading.title.as_deref().and_then(parse_chapter_heading) {
                        Some(scene) if scene.kind == HeadingKind::Scene => {
                            p.start_chapter(heading.label.clone());
                            p.start_scene(Some(scene.name()));
                        }
                        _ => p.start_chapter(heading.name()),
                    }
                }
                HeadingKind::Chapter => {}
            }
            if heading.kind != HeadingKind::Chapter {
                continue;
            }
            let mut name = heading.name();
            if heading.title.is_none() {
                // A title on the next non-blank line, when that line is a paragraph of its own.
                let mut j = i;
                while j < lines.len() && lines[j].trim().is_empty() {
                    j += 1;
                }
                let alone = lines.get(j + 1).is_none_or(|l| l.trim().is_empty());
                if j < lines.len() && alone && is_title_line(lines[j]) {
                    name = join_heading(&heading.label, &collapse_ws(lines[j]));
                    i = j + 1;
                }
            }
            p.start_chapter(name);
            continue;
        }
        if is_scene_break(trimmed) {
            p.start_scene(None);
            continue;
        }
        if let Some((speaker, said)) = script_line(trimmed) {
            p.flush();
            p.push(collapse_ws(said), Some(speaker.to_string()));
            continue;
        }
        if let Some((speaker, said)) = cast.as_ref().and_then(|c| c.speaker(&lines, i - 1)) {
            p.flush();
            p.speaker = Some(speaker.to_string());
            if !said.is_empty() {
                p.paragraph.push(said);
            }
            continue;
        }
        if line.starts_with([' ', '\t', '\u{3000}']) {
            p.flush();
        }
        p.paragraph.push(trimmed);
    }
    p.flush();
    p.out
}

/// The Markdown heading level that marks chapters (see the module docs).
fn markdown_chapter_level(lines: &[&str]) -> Option<usize> {
    let mut counts = [0usize; 7];
    for line in lines {
        if let Some((level, _)) = markdown_heading(line) {
            counts[level] += 1;
        }
    }
    (1..=6)
        .find(|&l| counts[l] >= 2)
        .or_else(|| (1..=6).find(|&l| counts[l] > 0))
}

fn parse_jsonl(name: &str, story: &str, text: &str, strip: bool) -> Result<Vec<Segment>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |detail: String| RetrievalError::Parse {
            file: name.to_string(),
            line: i + 1,
            detail,
        };
        let value: Value =
            serde_json::from_str(line).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(err("expected a JSON object".into()));
        };
        let text = match obj.get("text") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(err("field `text` must be a string".into())),
            None => return Err(err("missing field `text`".into())),
        };
        let chapter = match obj.get("chapter") {
            Some(v) => label(v)
                .ok_or_else(|| err("field `chapter` must be a string or an integer".into()))?,
            None => return Err(err("missing field `chapter`".into())),
        };
        let optional = |field: &str| -> Result<Option<String>> {
            match obj.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => label(v)
                    .map(|s| (!s.is_empty()).then_some(s))
                    .ok_or_else(|| err(format!("field `{field}` must be a string or an integer"))),
            }
        };
        let record_story = optional("story")?.unwrap_or_else(|| story.to_string());
        let (scene, speaker) = (optional("scene")?, optional("speaker")?);
        let text = collapse_ws(&if strip {
            strip_commentary(text)
        } else {
            Cow::Borrowed(text)
        });
        if !text.is_empty() {
            out.push(Segment {
                story: record_story,
                chapter,
                scene,
                speaker,
                text,
            });
        }
    }
    Ok(out)
}

/// A string or integer field as a trimmed string.
fn label(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
#[path = "corpus_tests.rs"]
mod tests;
