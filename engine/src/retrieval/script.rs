//! Plain-text scripts: stage plays and screenplays read as stories with speakers.
//!
//! A plain-text input is read as a script when speaker cues start at least
//! [`MIN_CUE_PARAGRAPHS`] paragraphs and at least 30 % of all paragraphs (a novel's dialogue
//! sits inside its paragraphs, so prose never gets there). A **cue** starts a paragraph (the line
//! before it is blank) and names a speaker in one of these shapes:
//!
//! | shape | example | seen in |
//! |---|---|---|
//! | name alone on its line, then the speech | `PROSPERO.` / `Ber.` / `HAMLET:` | Gutenberg plays |
//! | name, `.` or `:`, the speech on the same line | `BOATSWAIN. Here, master` / `  Gonz. I'le warrant him` | Folio texts, transcripts |
//! | name, a tab, the speech | `ALICE⇥Where am I?` | spreadsheets, subtitles |
//! | a capitalised cue alone, no mark | `ALICE` / `ALICE (V.O.)` | Fountain screenplays |
//!
//! A name is one to four words, each capitalised (`of`, `the`, `and` may join them), at most
//! [`MAX_NAME_CHARS`] characters, and never a stage word (`Enter`, `Exit`, `Scene`, …) or a
//! title (`Mr`, `Dr`, …). A mixed-case name must cue at least two paragraphs; an all-capital one
//! counts once it is seen, as plays set their speakers in capitals.
//!
//! **Speaker names** are what a reader calls the character: all-capital cues are title-cased
//! (`FIRST CITIZEN` → `First Citizen`), and an abbreviated cue that is not a word of the text
//! (`Ber.`, `Ham.`) becomes the capitalised word of the text it abbreviates — preferring one
//! named before the first act (the cast list), then the most frequent (`Ber.` → `Bernardo`).
//! A cue that is a role the cast list gives to one person keeps the role and adds the name
//! (`Claudius, King of Denmark.` → `King.` speaks as `King Claudius`): a reader asking "which
//! character …" wants the name, and the index then matches either.
//!
//! The speech runs from the cue to the next blank line or cue. Stage directions (`[Enter
//! Ariel]`, `Exit.`) that stand as their own paragraphs stay text without a speaker; act and
//! scene headings are read by the corpus parser (`ACT I.` starts a chapter, `Scene II.` a scene).

use std::collections::HashMap;

/// Fewest cue paragraphs that make a text a script.
pub const MIN_CUE_PARAGRAPHS: usize = 20;

/// Longest speaker name, in characters.
pub const MAX_NAME_CHARS: usize = 32;

/// Words that open stage directions or headings, and titles: never speaker names.
const NOT_NAMES: [&str; 22] = [
    "enter", "exit", "exeunt", "re-enter", "manet", "manent", "act", "actus", "scene", "scena",
    "scoena", "chapter", "mr", "mrs", "ms", "dr", "st", "mt", "no", "note", "finis", "fade",
];

/// Small words allowed inside a name (`Ghost of Hamlet`).
const JOINERS: [&str; 4] = ["of", "the", "and", "de"];

/// Speaker labels for a group, not one character (lower case): `All`, `Both`, `Danes`,
/// `Mariners`. A line they speak has no one speaker to name.
const GROUPS: &[&str] = &[
    "all",
    "attendants",
    "both",
    "citizens",
    "courtiers",
    "danes",
    "gentlemen",
    "guards",
    "ladies",
    "lords",
    "many",
    "mariners",
    "musicians",
    "officers",
    "omnes",
    "others",
    "players",
    "sailors",
    "senators",
    "servants",
    "several",
    "soldiers",
    "spirits",
    "watchmen",
];

/// Does a speaker label name a group rather than one character (`All`, `Both`, `Danes`,
/// `Mar. and Ber.`, `Lords, Attendants`)? Such a speaker is no entity of the story and no
/// answer to "who says …".
pub fn is_group(label: &str) -> bool {
    let lower = label.trim().trim_end_matches([':', '.']).to_lowercase();
    GROUPS.contains(&lower.as_str())
        || lower.contains(" and ")
        || lower.contains('&')
        || lower.contains(',')
}

/// A speaker cue as written on one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cue<'a> {
    /// The name as written, without its mark (`Ber`, `FIRST CITIZEN`).
    pub label: &'a str,
    /// The speech on the same line (trimmed), or `""` when the name stands alone.
    pub rest: &'a str,
    /// The name is written in capitals.
    pub caps: bool,
}

/// Reads `line` as a cue by its shape alone (module docs); whether it starts a paragraph and
/// whether the text is a script are the caller's to know.
pub fn cue(line: &str) -> Option<Cue<'_>> {
    let t = line.trim();
    // A tab ends the name in `NAME<TAB>speech`.
    if let Some((name, rest)) = t.split_once('\t') {
        let name = name.trim_end_matches(['.', ':']).trim();
        return named(name, rest.trim());
    }
    // `NAME.` / `NAME:` alone, the name perhaps abbreviated itself (`P. King.`).
    if let Some(name) = t.strip_suffix(['.', ':']) {
        if let Some(c) = named(name.trim(), "") {
            return Some(c);
        }
    }
    // `NAME.` / `NAME:` then the speech after a space.
    if let Some(end) = t.find(['.', ':']) {
        let (name, after) = (&t[..end], &t[end + 1..]);
        if after.is_empty() || after.starts_with([' ', '\t']) {
            if let Some(c) = named(name.trim(), after.trim()) {
                return Some(c);
            }
        }
    }
    // Fountain: a capitalised name alone, maybe with an extension such as `(V.O.)`.
    let name = match t.find('(') {
        Some(p) if t.ends_with(')') => t[..p].trim(),
        _ => t,
    };
    named(name, "").filter(|c| c.caps && name.chars().filter(|c| c.is_alphabetic()).count() >= 2)
}

fn named<'a>(name: &'a str, rest: &'a str) -> Option<Cue<'a>> {
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return None;
    }
    let words: Vec<&str> = name.split_whitespace().collect();
    if words.is_empty() || words.len() > 4 {
        return None;
    }
    let first = words[0];
    if !first.chars().next().is_some_and(char::is_uppercase) {
        return None;
    }
    let bare = first.strip_suffix('.').unwrap_or(first);
    if NOT_NAMES.iter().any(|w| w.eq_ignore_ascii_case(bare)) {
        return None;
    }
    let word_ok = |w: &str| {
        let w = w.strip_suffix('.').unwrap_or(w);
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_alphabetic() || c == '\'' || c == '-')
            && (w.chars().next().is_some_and(char::is_uppercase) || JOINERS.contains(&w))
    };
    if !words.iter().all(|w| word_ok(w)) {
        return None;
    }
    let letters = || name.chars().filter(|c| c.is_alphabetic());
    let caps = letters().all(char::is_uppercase) && letters().count() >= 2;
    Some(Cue {
        label: name,
        rest,
        caps,
    })
}

/// The cast of a text read as a script: cue labels to speaker names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cast {
    names: HashMap<String, String>,
}

impl Cast {
    /// Reads `lines` as a script if they are one (module docs). `before_first_act` is the number
    /// of leading lines before the first act or chapter heading (the cast list, if any).
    pub fn detect(lines: &[&str], before_first_act: usize) -> Option<Cast> {
        let mut counts: HashMap<&str, (usize, bool)> = HashMap::new();
        let mut paragraphs = 0usize;
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() || !starts_paragraph(lines, i) {
                continue;
            }
            paragraphs += 1;
            if let Some(c) = cue_at(lines, i) {
                let e = counts.entry(c.label).or_insert((0, c.caps));
                e.0 += 1;
            }
        }
        counts.retain(|_, (n, caps)| *caps || *n >= 2);
        let cued: usize = counts.values().map(|(n, _)| n).sum();
        if cued < MIN_CUE_PARAGRAPHS || cued * 10 < paragraphs * 3 {
            return None;
        }
        let words = Words::count(lines, before_first_act, &counts);
        let roles = Roles::read(&lines[..before_first_act.min(lines.len())]);
        let names = counts
            .keys()
            .map(|&label| (label.to_string(), roles.name(words.speaker(label))))
            .collect();
        Some(Cast { names })
    }

    /// The speaker and the speech on the same line, when line `i` of `lines` is a cue of this
    /// cast.
    pub fn speaker<'a>(&self, lines: &[&'a str], i: usize) -> Option<(&str, &'a str)> {
        if !starts_paragraph(lines, i) {
            return None;
        }
        let c = cue_at(lines, i)?;
        self.names.get(c.label).map(|n| (n.as_str(), c.rest))
    }
}

/// The roles of a cast list: `Claudius, King of Denmark.` gives the role `King` to the name
/// `Claudius`, so the cue `King.` speaks as `King Claudius` (a reader asking "which character
/// …" wants the name; the play's own label stays in front).
struct Roles {
    /// Role (lowercase) → the names the cast list gives it.
    names: HashMap<String, Vec<String>>,
}

impl Roles {
    /// Reads the cast-list lines: `Name, Role …` where the name is one or two capitalised words
    /// and the role is [`role_head`]'s.
    fn read(lines: &[&str]) -> Roles {
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        for line in lines {
            let Some((name, role)) = line.trim().split_once(',') else {
                continue;
            };
            let name_words: Vec<&str> = name.split_whitespace().collect();
            let capitalised = |w: &&str| {
                w.chars().next().is_some_and(char::is_uppercase)
                    && w.chars().all(char::is_alphabetic)
            };
            if name_words.is_empty() || name_words.len() > 2 || !name_words.iter().all(capitalised)
            {
                continue;
            }
            if let Some(head) = role_head(role) {
                names
                    .entry(head.to_lowercase())
                    .or_default()
                    .push(title_case(&name_words.join(" ")));
            }
        }
        Roles { names }
    }

    /// `speaker` with the one name the cast list gives that role after it (`King` → `King
    /// Claudius`); unchanged when the role is no one's, several people's, or is itself a name.
    fn name(&self, speaker: String) -> String {
        let listed = self.names.values().flatten().any(|n| *n == speaker);
        match self.names.get(&speaker.to_lowercase()).map(Vec::as_slice) {
            Some([one]) if !listed && *one != speaker => format!("{speaker} {one}"),
            _ => speaker,
        }
    }
}

/// The role a cast-list entry names after its comma, an article before it skipped: capitalised
/// words up to `of`, a comma, a full stop or the end (`King of Denmark.` → `King`, `Lord
/// Chamberlain.` → `Lord Chamberlain`), or one lowercase word followed by the same (`a soldier`
/// → `soldier`, `king of Denmark` → `king`); `None` for a description (`Son to the former`, `an
/// honest old counsellor`, `his Brother`).
fn role_head(role: &str) -> Option<String> {
    let mut words = role.split_whitespace().peekable();
    if words.peek().is_some_and(|w| ["a", "an", "the"].contains(w)) {
        words.next();
    }
    let mut head: Vec<&str> = Vec::new();
    while let Some(w) = words.next() {
        let bare = w.trim_end_matches([',', '.', ';']);
        let alphabetic = !bare.is_empty() && bare.chars().all(char::is_alphabetic);
        let capital = bare.chars().next().is_some_and(char::is_uppercase);
        if !alphabetic || (!capital && !head.is_empty()) {
            return (bare == "of" && !head.is_empty()).then(|| head.join(" "));
        }
        head.push(bare);
        if bare.len() != w.len() {
            break;
        }
        if !capital {
            // One lowercase word: the role only when `of` or nothing follows.
            return match words.next() {
                None | Some("of") => Some(head.join(" ")),
                Some(_) => None,
            };
        }
    }
    (!head.is_empty()).then(|| head.join(" "))
}

/// Line `i` follows a blank line (or opens the text).
fn starts_paragraph(lines: &[&str], i: usize) -> bool {
    i == 0 || lines[i - 1].trim().is_empty()
}

/// Line `i` as a cue in context: a name alone needs its speech on the next line.
fn cue_at<'a>(lines: &[&'a str], i: usize) -> Option<Cue<'a>> {
    let c = cue(lines[i])?;
    if c.rest.is_empty() && lines.get(i + 1).is_none_or(|l| l.trim().is_empty()) {
        return None;
    }
    Some(c)
}

/// Capitalised words of the text outside the cues, for spelling out abbreviated names.
struct Words<'a> {
    /// Every word of the text (lowercase) that is not a cue.
    all: HashMap<String, usize>,
    /// Capitalised words: (count before the first act, count in all).
    capitalised: HashMap<&'a str, (usize, usize)>,
}

impl<'a> Words<'a> {
    fn count(lines: &[&'a str], before: usize, cues: &HashMap<&str, (usize, bool)>) -> Self {
        let mut all = HashMap::new();
        let mut capitalised: HashMap<&str, (usize, usize)> = HashMap::new();
        for (i, line) in lines.iter().enumerate() {
            if starts_paragraph(lines, i)
                && cue_at(lines, i).is_some_and(|c| cues.contains_key(c.label))
            {
                continue;
            }
            for w in line.split(|c: char| !(c.is_alphabetic() || c == '\'')) {
                let w = w.trim_matches('\'');
                let w = w.strip_suffix("'s").unwrap_or(w);
                if w.is_empty() {
                    continue;
                }
                *all.entry(w.to_lowercase()).or_insert(0) += 1;
                if w.chars().next().is_some_and(char::is_uppercase) {
                    let e = capitalised.entry(w).or_insert((0, 0));
                    e.0 += usize::from(i < before);
                    e.1 += 1;
                }
            }
        }
        Words { all, capitalised }
    }

    /// The speaker name for cue `label` (module docs): a word of the cast list that spells the
    /// label out (`Hor` → `Horatio`; not its plural: `Lord` stays, not `Lords`); else, when the
    /// label is no word of the text, its most frequent capitalised spelling-out.
    fn speaker(&self, label: &str) -> String {
        if label.contains(char::is_whitespace) || label.chars().count() < 2 {
            return title_case(label);
        }
        let lower = label.to_lowercase();
        let extends = |w: &str| {
            let wl = w.to_lowercase();
            wl.len() > lower.len()
                && wl.starts_with(&lower)
                && wl != format!("{lower}s")
                && wl != format!("{lower}es")
        };
        // Most frequent first; ties to the alphabetically first, so the choice is stable.
        let best = |listed: bool| {
            self.capitalised
                .iter()
                .filter(|(w, (before, n))| extends(w) && if listed { *before > 0 } else { *n >= 2 })
                .max_by(|a, b| a.1 .1.cmp(&b.1 .1).then(b.0.cmp(a.0)))
                .map(|(w, _)| *w)
        };
        let found = best(true).or_else(|| {
            (!self.all.contains_key(&lower))
                .then(|| best(false))
                .flatten()
        });
        match found {
            // A cast list names groups (`Messengers`): the singular, when the text has it.
            Some(w) => match w.strip_suffix('s') {
                Some(one) if self.capitalised.contains_key(one) => title_case(one),
                _ => title_case(w),
            },
            None => title_case(label),
        }
    }
}

/// `FIRST CITIZEN` → `First Citizen`; a name in mixed case is kept.
fn title_case(name: &str) -> String {
    let letters = || name.chars().filter(|c| c.is_alphabetic());
    if !letters().all(char::is_uppercase) {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len());
    let mut start = true;
    for c in name.chars() {
        if c.is_alphabetic() {
            if start {
                out.push(c);
            } else {
                out.extend(c.to_lowercase());
            }
            start = false;
        } else {
            out.push(c);
            start = c == ' ' || c == '-';
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_no_one_speaker() {
        for g in [
            "All",
            "BOTH.",
            "Danes",
            "Mar. and Ber",
            "Lords, Attendants",
            "Omnes:",
        ] {
            assert!(is_group(g), "{g}");
        }
        for one in [
            "Hamlet",
            "First Player",
            "Allan",
            "Lord Polonius",
            "King Claudius",
        ] {
            assert!(!is_group(one), "{one}");
        }
    }

    #[test]
    fn cue_shapes() {
        let c = |l| cue(l).map(|c| (c.label, c.rest, c.caps));
        assert_eq!(c("PROSPERO."), Some(("PROSPERO", "", true)));
        assert_eq!(c("Ber."), Some(("Ber", "", false)));
        assert_eq!(c("FIRST CITIZEN:"), Some(("FIRST CITIZEN", "", true)));
        assert_eq!(
            c("  Gonz. I'le warrant him"),
            Some(("Gonz", "I'le warrant him", false))
        );
        assert_eq!(
            c("ALICE\tWhere am I?"),
            Some(("ALICE", "Where am I?", true))
        );
        assert_eq!(c("MOLLY: Hi."), Some(("MOLLY", "Hi.", true)));
        assert_eq!(c("ALICE (V.O.)"), Some(("ALICE", "", true)));
        assert_eq!(c("P. King."), Some(("P. King", "", false)));
        assert_eq!(
            c("Ghost of Hamlet. Mark me."),
            Some(("Ghost of Hamlet", "Mark me.", false))
        );
        // Not cues: prose, stage directions, headings, titles, numbers, long names.
        for line in [
            "Alice was beginning to get very tired.",
            "Enter Ariel.",
            "Exit.",
            "[Exit ARIEL]",
            "SCENE 2",
            "Mr. Brown came in.",
            "Mr. Brown.",
            "Exit Ariel.",
            "I",
            "A very long name that goes on. And on.",
            "the king. He said",
            "1. Clown.",
            "Bernardo?",
            "The Four Great Kingdoms Of Everything.",
        ] {
            assert_eq!(cue(line), None, "{line}");
        }
    }

    #[test]
    fn names_are_spelled_out_and_title_cased() {
        assert_eq!(title_case("FIRST CITIZEN"), "First Citizen");
        assert_eq!(title_case("JOHN-PAUL"), "John-Paul");
        assert_eq!(title_case("Ber"), "Ber");
    }

    fn play(speeches: usize) -> String {
        let mut s = String::from(
            "Persons.\n\nBernardo, an officer.\nFrancisco, a soldier.\nLords, Messengers.\n\n",
        );
        s.push_str("ACT I.\n\n[Enter Bernardo.]\n\n");
        for k in 0..speeches {
            let (who, line) = if k % 2 == 0 {
                ("Ber.", "Who's there, Francisco?")
            } else {
                ("Fran.", "Nay, answer me: Bernardo.")
            };
            s.push_str(&format!("{who}\n{line}\nA second verse line.\n\n"));
        }
        s.push_str("KING.\nAll caps cue once, alone.\n\n");
        s.push_str("[Exeunt Ber. and Fran.]\n\nLord.\nMy lord, a Messenger.\n\n");
        s.push_str("Mess.\nNews.\n\nLord.\nSpeak.\n\nMess.\nMore news.\n\n");
        s
    }

    #[test]
    fn a_play_is_detected_and_its_cues_named() {
        let text = play(24);
        let lines: Vec<&str> = text.lines().collect();
        let cast = Cast::detect(&lines, 6).expect("a play");
        let speakers: std::collections::BTreeSet<&String> = cast.names.values().collect();
        assert_eq!(speakers.len(), 5, "{speakers:?}");
        let i = lines.iter().position(|l| *l == "Ber.").unwrap();
        assert_eq!(cast.speaker(&lines, i), Some(("Bernardo", "")));
        let i = lines.iter().position(|l| *l == "Fran.").unwrap();
        assert_eq!(cast.speaker(&lines, i), Some(("Francisco", "")));
        let i = lines.iter().position(|l| *l == "KING.").unwrap();
        assert_eq!(cast.speaker(&lines, i), Some(("King", "")));
        // Not the cast list's plural, but its singular when the text has one.
        let i = lines.iter().position(|l| *l == "Lord.").unwrap();
        assert_eq!(cast.speaker(&lines, i), Some(("Lord", "")));
        let i = lines.iter().position(|l| *l == "Mess.").unwrap();
        assert_eq!(cast.speaker(&lines, i), Some(("Messenger", "")));
        // A speech line is not a cue, even when shaped like one.
        let i = lines.iter().position(|l| l.starts_with("Who's")).unwrap();
        assert_eq!(cast.speaker(&lines, i), None);
    }

    #[test]
    fn a_role_cue_speaks_with_the_cast_lists_name() {
        let mut s = String::from(
            "HAMLET, PRINCE OF DENMARK\n\nPersons.\n\nClaudius, King of Denmark.\n\
             Hamlet, Son to the former, and Nephew to the present King.\n\
             Polonius, Lord Chamberlain.\nFrancisco, a Soldier\n\
             Adrian, Lord\nGonzalo, Lord\n\
             Gertrude, Queen of Denmark, and Mother of Hamlet.\n\n",
        );
        s.push_str("ACT I.\n\n");
        for k in 0..30 {
            let who = ["King.", "Queen.", "Lord.", "Pol.", "Soldier.", "Ham."][k % 6];
            s.push_str(&format!("{who}\nA line of verse.\n\n"));
        }
        let lines: Vec<&str> = s.lines().collect();
        let first_act = lines.iter().position(|l| *l == "ACT I.").unwrap();
        let cast = Cast::detect(&lines, first_act).expect("a play");
        let said = |cue: &str| {
            let i = lines.iter().position(|l| *l == cue).unwrap();
            cast.speaker(&lines, i).map(|(n, _)| n.to_string())
        };
        assert_eq!(said("King.").as_deref(), Some("King Claudius"));
        assert_eq!(said("Queen.").as_deref(), Some("Queen Gertrude"));
        assert_eq!(said("Soldier.").as_deref(), Some("Soldier Francisco"));
        // Two lords: the role names no one; a name keeps itself.
        assert_eq!(said("Lord.").as_deref(), Some("Lord"));
        assert_eq!(said("Pol.").as_deref(), Some("Polonius"));
        assert_eq!(said("Ham.").as_deref(), Some("Hamlet"));
    }

    #[test]
    fn a_cast_lists_role_is_its_head_or_nothing() {
        let head = |r: &str| role_head(r);
        assert_eq!(head(" King of Denmark.").as_deref(), Some("King"));
        assert_eq!(
            head(" Lord Chamberlain.").as_deref(),
            Some("Lord Chamberlain")
        );
        assert_eq!(head(" a Soldier").as_deref(), Some("Soldier"));
        // Editions that set roles in lowercase.
        assert_eq!(
            head(" king of Denmark, Hamlet's uncle").as_deref(),
            Some("king")
        );
        assert_eq!(head(" an officer.").as_deref(), Some("officer"));
        // Descriptions, not roles.
        for r in [
            " Son to the former, and Nephew to the present King.",
            " an honest old counsellor",
            " a drunken Butler",
            " his Brother",
            " son to the late king",
            "",
            " 1st Lord",
        ] {
            assert_eq!(head(r), None, "{r:?}");
        }
    }

    #[test]
    fn prose_and_short_scripts_are_not_plays() {
        // Too few cues.
        let text = play(10);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(Cast::detect(&lines, 5), None);
        // Cue-shaped paragraph openings in a novel stay under 30 % of its paragraphs.
        let mut novel = String::new();
        for k in 0..100 {
            if k % 4 == 0 {
                novel.push_str("Yes: she said so, and went on.\n\n");
            } else {
                novel.push_str(
                    "Alice was beginning to get very tired\nof sitting by her sister.\n\n",
                );
            }
        }
        let lines: Vec<&str> = novel.lines().collect();
        assert_eq!(Cast::detect(&lines, 0), None);
    }
}
