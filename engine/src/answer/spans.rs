//! Answer-sized spans of a passage: windows of whole clauses (across sentence ends), with the
//! clause before each; in a script a window starts at a speaker's label but never runs into the
//! next speaker's line. The reader ([`super::reader`]) scores them.

/// Cuts `text` into spans of at most `max` characters: every window of consecutive clauses
/// (a clause ends after `.` `!` `?` `;` `,` `:` `—` or their CJK forms, with any closing quote;
/// a clause longer than `max` is cut into runs of whole words) that fits, the longest from each
/// clause on. A window may cross a sentence end: the answer is often the clause after the one
/// the question was written from. In a script a window may start at a speaker's label
/// (`Gonzalo:`, so the span says who speaks) but never runs on into the next speaker's line.
/// Spans are trimmed verbatim substrings of `text`, at least `min` characters long, each once.
pub fn spans_of(text: &str, max: usize, min: usize) -> Vec<String> {
    windows(text, max, min, max)
        .into_iter()
        .map(|w| w.text)
        .collect()
}

/// A span of [`spans_of`] with what surrounds it in its passage.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Window {
    /// The span, verbatim.
    pub text: String,
    /// The clause just before it (empty for the first).
    pub before: String,
    /// In a script, the label of the speaker whose line the span lies in (`Antonio:`), when
    /// the span does not open with it: who says the span's words.
    pub speaker: Option<String>,
    /// The words that finish the span's sentence when the span stops on an open mark (a
    /// comma, colon, semicolon or dash: `The executioner's argument was,`), verbatim from
    /// where the span ends, so that the span and its rest are one substring of `text`: up to
    /// the sentence's end when it comes within the window's `finish` characters, else its
    /// whole clauses that fit (`… solid glass;` → ` there was nothing on it except a tiny
    /// golden key,`), never past the next speaker's label ([`windows`]); empty when the span
    /// closes its sentence or no clause fits.
    pub rest: String,
}

/// The spans of [`spans_of`], each with the clause just before it in `text`, the speaker of
/// its line, and the rest of its sentence when it stops on an open mark, the span and its rest
/// together at most `finish` characters ([`Window`]).
pub(crate) fn windows(text: &str, max: usize, min: usize, finish: usize) -> Vec<Window> {
    let max = max.max(1);
    let units: Vec<(usize, usize)> = clauses(text)
        .into_iter()
        .flat_map(|(a, b)| runs(text, a, b, max))
        .collect();
    let len = |a: usize, b: usize| text[a..b].trim().chars().count();
    // Units that open with a speaker's label: a window never runs on into one.
    let label: Vec<bool> = units
        .iter()
        .map(|&(a, _)| starts_with_speaker_label(&text[a..]))
        .collect();
    // The speaker's label each unit's line opens with: the last label unit at or before it,
    // with an abbreviation before it that ends at the same colon (`P.` `King:` are one
    // label; `Milan.` before `Miranda:` ends the last line), up to its colon.
    let colon = |u: usize| text[units[u].0..].find(':').map(|c| units[u].0 + c + 1);
    let initial = |u: usize| text[units[u].0..units[u].1].trim().chars().count() <= 4;
    let mut speaker: Vec<Option<(usize, &str)>> = Vec::with_capacity(units.len());
    for u in 0..units.len() {
        let own = if label[u] {
            let mut k = u;
            while k > 0 && label[k - 1] && initial(k - 1) && colon(k - 1) == colon(u) {
                k -= 1;
            }
            colon(u).map(|c| (k, trim_dashes(&text[units[k].0..c])))
        } else {
            None
        };
        let inherited = own.or_else(|| u.checked_sub(1).and_then(|p| speaker[p]));
        speaker.push(inherited);
    }
    let mut out: Vec<Window> = Vec::new();
    for i in 0..units.len() {
        let mut j = i;
        while j + 1 < units.len() && len(units[i].0, units[j + 1].1) <= max && !label[j + 1] {
            j += 1;
        }
        let span = text[units[i].0..units[j].1].trim();
        if span.chars().count() >= min.min(max) && !out.iter().any(|o| o.text == span) {
            // Where the trimmed span ends in `text`, and the rest of its sentence.
            let start =
                units[i].0 + (text[units[i].0..].len() - text[units[i].0..].trim_start().len());
            let end = start + span.len();
            let rest = if opens_onto_more(span) {
                // The sentence's end when it fits, else as many of its clauses as fit (a
                // whole clause: a run of a long one ends on no mark).
                let fits: Vec<usize> = (j + 1..units.len())
                    .take_while(|&k| !label[k] && len(start, units[k].1) <= finish)
                    .collect();
                let unit = |k: &&usize| &text[units[**k].0..units[**k].1];
                fits.iter()
                    .find(|k| ends_sentence(unit(k)))
                    .or_else(|| fits.iter().rev().find(|k| clause_end(unit(k))))
                    .map_or("", |&k| text[end..units[k].1].trim_end())
            } else {
                ""
            };
            let before = i
                .checked_sub(1)
                .map_or("", |p| text[units[p].0..units[p].1].trim());
            out.push(Window {
                text: span.to_string(),
                before: before.to_string(),
                // Not when the span opens at (or inside) its speaker's label.
                speaker: speaker[i]
                    .filter(|&(k, _)| !label[i] && k < i)
                    .map(|(_, l)| l.to_string()),
                rest: rest.to_string(),
            });
        }
        if j + 1 == units.len() {
            break;
        }
    }
    out
}

/// Closing quotes and brackets, which may follow a clause's last mark.
const CLOSING: &str = "'\"’”)]」』）`";

/// Does `span` stop on an open mark (a comma, colon, semicolon or dash, before any closing
/// quote: `housemaid,'`), so that its sentence goes on after it?
fn opens_onto_more(span: &str) -> bool {
    span.trim_end_matches(|c: char| CLOSING.contains(c))
        .ends_with([',', ':', ';', '—', '-', '–', '，', '：', '；', '、'])
}

/// Does the clause `unit` end on a clause's mark (a sentence's, or an open one)?
fn clause_end(unit: &str) -> bool {
    ends_sentence(unit) || opens_onto_more(unit)
}

/// Does the clause `unit` end a sentence (a full stop, `!`, `?` or `;`, before any closing
/// quote; their CJK forms)?
fn ends_sentence(unit: &str) -> bool {
    unit.trim_end()
        .trim_end_matches(|c: char| CLOSING.contains(c))
        .ends_with(['.', '!', '?', ';', '。', '！', '？', '；', '…'])
}

/// A clause that is only a script's speaker label, as the index writes it: one to four
/// capitalised words and a colon (`Gonzalo:`, `First Citizen:`, `P. King:`).
fn is_speaker_label(clause: &str) -> bool {
    let Some(name) = trim_dashes(clause).strip_suffix(':') else {
        return false;
    };
    let words: Vec<&str> = name.split_whitespace().collect();
    (1..=4).contains(&words.len())
        && name.chars().count() <= 32
        && words.iter().all(|w| {
            // An abbreviation may end in a stop (`P.`, `Mrs.`), a name may not (`Milan.` ends
            // the last line).
            let w = match w.strip_suffix('.') {
                Some(a) if a.chars().count() <= 3 => a,
                Some(_) => return false,
                None => w,
            };
            w.starts_with(char::is_uppercase)
                && w.chars()
                    .all(|c| c.is_alphabetic() || c == '\'' || c == '-')
        })
}

/// `text` trimmed, and without the dashes an interrupted line ends with (`conscience,--
/// Antonio:` splits after the comma).
fn trim_dashes(text: &str) -> &str {
    text.trim().trim_start_matches(['-', '–', '—']).trim_start()
}

/// Does `rest` open with a speaker's label (which may span clauses: `P. King:`)?
pub(crate) fn starts_with_speaker_label(rest: &str) -> bool {
    let head: String = rest.chars().take(40).collect();
    head.find(':')
        .is_some_and(|colon| is_speaker_label(&head[..=colon]))
}

/// Byte ranges of the clauses of `text` (see [`spans_of`]), empty ones dropped.
fn clauses(text: &str) -> Vec<(usize, usize)> {
    let end = |c: char| ".!?;,:—。！？；，：、".contains(c);
    let closing = |c: char| CLOSING.contains(c);
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if !end(c) {
            continue;
        }
        let mut stop = i + c.len_utf8();
        while let Some(&(j, d)) = it.peek() {
            if !(closing(d) || end(d)) {
                break;
            }
            stop = j + d.len_utf8();
            it.next();
        }
        out.push((start, stop));
        start = stop;
    }
    out.push((start, text.len()));
    out.retain(|&(a, b)| !text[a..b].trim().is_empty());
    out
}

/// The clause `text[a..b]` as byte ranges of at most `max` characters each: itself when it
/// fits, else runs of whole words (a word longer than `max`, or CJK text without spaces, in
/// runs of `max` characters).
fn runs(text: &str, a: usize, b: usize, max: usize) -> Vec<(usize, usize)> {
    if text[a..b].trim().chars().count() <= max {
        return vec![(a, b)];
    }
    let mut out = Vec::new();
    let (mut start, mut count, mut last_space) = (a, 0usize, None);
    for (i, c) in text[a..b].char_indices() {
        let i = a + i;
        if count == max {
            let cut = last_space.filter(|&s| s > start).unwrap_or(i);
            out.push((start, cut));
            start = cut;
            count = text[start..i].chars().count();
            last_space = None;
        }
        if c == ' ' {
            last_space = Some(i);
        }
        count += 1;
    }
    out.push((start, b));
    out.retain(|&(x, y)| !text[x..y].trim().is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_sentences_and_clause_windows_verbatim() {
        let t = "Alice was tired. 'Oh dear!' said the Rabbit. She ran, and she ran, and she \
                 ran until the garden, which was lovely, came in sight; then she stopped.";
        let s = spans_of(t, 40, 5);
        // Windows cross sentence ends, the longest from each clause.
        assert_eq!(s[0], "Alice was tired. 'Oh dear!'", "{s:?}");
        assert_eq!(s[1], "'Oh dear!' said the Rabbit. She ran,", "{s:?}");
        assert_eq!(
            s.last().map(String::as_str),
            Some("came in sight; then she stopped.")
        );
        for x in &s {
            assert!(t.contains(x.as_str()), "{x:?} is not verbatim");
            assert!(x.chars().count() <= 40, "{x:?}");
            assert_eq!(x.trim(), x);
        }
        assert!(s.iter().any(|x| x.contains("until the garden")), "{s:?}");
        // A clause longer than the window is cut into runs of whole words.
        let w = spans_of("one two three four five six seven eight nine ten", 14, 1);
        assert_eq!(w[0], "one two three");
        assert!(w.iter().all(|x| x.chars().count() <= 14), "{w:?}");
        // CJK sentences split at 。 and long ones into runs.
        let c = "宝玉笑道：这个妹妹我曾见过的。黛玉心中想道，好生奇怪，倒像在那里见过一般。";
        let s = spans_of(c, 10, 2);
        assert!(s
            .iter()
            .all(|x| c.contains(x.as_str()) && x.chars().count() <= 10));
        assert!(s.iter().any(|x| x.contains("好生奇怪")), "{s:?}");
    }

    #[test]
    fn a_span_on_an_open_mark_carries_the_rest_of_its_sentence() {
        let t = "She found it very hard to hear. The executioner's argument was, that you \
                 couldn't cut off a head unless there was a body to cut it off from: that he had \
                 never had to do such a thing before. `He took me for his housemaid,' she said \
                 to herself as she ran. Then all was quiet.";
        let w = windows(t, 40, 5, 170);
        let of = |x: &str| {
            w.iter()
                .find(|v| v.text == x)
                .unwrap_or_else(|| panic!("{x:?} not in {w:?}"))
        };
        // The argument is not said before the comma: the rest runs to the sentence's end,
        // over the colon, and the span with its rest is one verbatim substring.
        let arg = of("The executioner's argument was,");
        assert_eq!(
            arg.rest,
            " that you couldn't cut off a head unless there was a body to cut it off from: \
             that he had never had to do such a thing before."
        );
        // A comma inside a closing quote is open too.
        assert_eq!(
            of("`He took me for his housemaid,'").rest,
            " she said to herself as she ran."
        );
        for v in &w {
            assert!(t.contains(&format!("{}{}", v.text, v.rest)), "{v:?}");
            // A span that closes its sentence has no rest.
            if v.text.ends_with(['.', '?', '!']) {
                assert_eq!(v.rest, "", "{v:?}");
            }
            assert!(
                v.text.chars().count() + v.rest.chars().count() <= 170,
                "{v:?}"
            );
        }
        // When the sentence does not end within the finish, its whole clauses that fit are
        // added (not a run of words cut from a long clause), or nothing when none fits.
        let rest_at = |finish: usize| {
            windows(t, 40, 5, finish)
                .into_iter()
                .find(|v| v.text == "The executioner's argument was,")
                .expect("the span")
                .rest
        };
        assert_eq!(
            rest_at(120),
            " that you couldn't cut off a head unless there was a body to cut it off from:"
        );
        assert_eq!(rest_at(100), "");
        // The rest never runs into the next speaker's line.
        let play = "Gonzalo: Had I plantation of this isle, my lord, Antonio: He'd sow't with \
                    nettle-seed.";
        for v in windows(play, 40, 5, 200) {
            assert!(!v.rest.contains("Antonio:"), "{v:?}");
        }
        // CJK: a clause that stops on ， runs to the 。
        let c = "宝玉笑道：这个妹妹我曾见过的。黛玉心中想道，好生奇怪，倒像在那里见过一般。";
        let w = windows(c, 8, 2, 40);
        let v = w
            .iter()
            .find(|v| v.text == "黛玉心中想道，")
            .expect("the clause");
        assert_eq!(v.rest, "好生奇怪，倒像在那里见过一般。");
    }

    #[test]
    fn script_spans_start_at_a_speaker_and_stop_before_the_next() {
        let t = "Prospero: Twelve year since, Thy father was the Duke of Milan. \
                 Miranda: Sir, are not you my father? P. King: Faith, I must leave thee.";
        let s = spans_of(t, 120, 5);
        assert!(
            s.contains(&"Prospero: Twelve year since, Thy father was the Duke of Milan.".into()),
            "{s:?}"
        );
        assert!(
            s.contains(&"Miranda: Sir, are not you my father?".into()),
            "{s:?}"
        );
        for x in &s {
            let labels = ["Prospero:", "Miranda:", "P. King:"];
            let inside = labels.iter().filter(|l| x[1..].contains(*l)).count();
            assert_eq!(inside, 0, "{x:?} runs into another speaker's line");
        }
        // Each span inside a line knows its speaker; a span that opens with the label does
        // not repeat it.
        let w = windows(t, 30, 5, 30);
        let who = |x: &str| {
            w.iter()
                .find(|v| v.text == x)
                .map(|v| v.speaker.clone())
                .unwrap_or_else(|| panic!("{x:?} not in {w:?}"))
        };
        assert_eq!(who("Sir, are not you my father?"), Some("Miranda:".into()));
        assert_eq!(who("Faith, I must leave thee."), Some("P. King:".into()));
        assert_eq!(who("Thy father was the Duke of"), Some("Prospero:".into()));
        assert_eq!(who("Milan."), Some("Prospero:".into()));
        assert_eq!(who("Prospero: Twelve year since,"), None);
        assert!(windows("No one speaks here, she said.", 30, 5, 30)
            .iter()
            .all(|v| v.speaker.is_none()));
        assert!(is_speaker_label(" First Citizen:") && is_speaker_label("P. King:"));
        assert!(!is_speaker_label("said the Hatter:") && !is_speaker_label("Alice"));
        assert!(is_speaker_label("Mrs. Quickly:") && !is_speaker_label("Milan. Miranda:"));
        // A line cut short ends in dashes; the next speaker's label follows them.
        let cut = "Sebastian: But, for your conscience,-- Antonio: Ay, sir; where lies that?";
        let w = windows(cut, 25, 5, 25);
        assert!(
            w.iter().any(|v| v.text == "Ay, sir; where lies that?"
                && v.speaker.as_deref() == Some("Antonio:")),
            "{w:?}"
        );
        assert!(
            w.iter().all(|v| !v.text[1..].contains("Antonio:")
                || v.text
                    .trim_start_matches(['-', ' '])
                    .starts_with("Antonio:")),
            "{w:?}"
        );
    }
}
