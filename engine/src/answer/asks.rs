//! What a question asks for ([`Wants`]), read from its wording, English and Chinese: the
//! reader ([`super::reader`]) scores a span higher when it holds that kind of answer.

use serde::{Deserialize, Serialize};

/// The kind of answer a question asks for, read from its wording (English and Chinese).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wants {
    /// A count, an age, a year: "how many …", "多少", "几".
    Number,
    /// Someone or something named: "who …", "what is the name of …", "谁", "名字".
    Name,
    /// A named place or work, not someone: "to which town …", "at which restaurant …", "which
    /// newspaper …" ([`NAMED_NOUNS`]); answered by a name the question lacks that is not a
    /// script's speaker.
    Named,
    /// Words said, written or sung: "what did … say", "what was written …", "说了什么".
    Words,
    /// A cause: "why …", "为什么".
    Reason,
    /// What someone is doing: "what was the Caterpillar doing …", "what are Ferdinand and
    /// Miranda doing …"; a span fits with a verb in `-ing` the question lacks (`quietly
    /// smoking a long hookah`, `playing at chess`).
    Doing,
    /// Anything else.
    Any,
}

/// English question words (lower case) that ask for a number.
const NUMBER_ASKS: &[&str] = &[
    "how many",
    "how much",
    "how old",
    "how long",
    "how far",
    "what year",
    "what age",
    "what number",
    "which year",
];
/// Chinese question words that ask for a number.
const NUMBER_ASKS_ZH: &[&str] = &["多少", "几", "多大", "多久", "哪年", "何年"];
/// English words that ask for a name (a surname is one: "What is Alice's surname?").
const NAME_ASKS: &[&str] = &["who", "whom", "whose", "name", "named", "names", "surname"];
/// Nouns for someone (or some creature) that ask for a name after "which" or "what" ("which
/// character says …", "what animal does Alice see …"): in a script most questions about a
/// line ask for its speaker this way.
const WHO_NOUNS: &[&str] = &[
    "character",
    "characters",
    "person",
    "people",
    "man",
    "men",
    "woman",
    "women",
    "lord",
    "lords",
    "lady",
    "ladies",
    "member",
    "members",
    "passenger",
    "juror",
    "jurors",
    "servant",
    "spirit",
    "animal",
    "animals",
    "creature",
    "creatures",
    "king",
    "queen",
    "boy",
    "girl",
    "teacher",
    "teachers",
    "student",
    "students",
    "friend",
    "guest",
    "guests",
    "witness",
    "fellow",
    "master",
    "officer",
    "sailor",
    "nobleman",
    "noblemen",
    "courtier",
    "soldier",
    "soldiers",
    "speaker",
    "child",
    "children",
    "sister",
    "sisters",
    "brother",
    "brothers",
    "son",
    "daughter",
    "uncle",
    "aunt",
    "gardener",
    "gardeners",
    "player",
    "players",
    "maid",
    "sentry",
    "sentries",
    "sentinel",
    "companion",
    "companions",
    "friends",
    "neighbour",
    "neighbours",
    "neighbor",
    "neighbors",
    "colleague",
    "colleagues",
    "duellist",
    "ancestor",
    "couple",
    "messenger",
    "captain",
    "priest",
    "prince",
    "princess",
    "duke",
    "knight",
    "courtiers",
    "servants",
    "spirits",
    "sailors",
    "officers",
    "schoolfellow",
    "schoolfellows",
    "suitor",
    "suitors",
    "lover",
    "lovers",
];
/// Nouns for a named place or work that ask for its name after "which" or "what" ("to which
/// town was Koga transferred?", "which newspaper ran the story?"): [`Wants::Named`].
const NAMED_NOUNS: &[&str] = &[
    "town",
    "city",
    "village",
    "country",
    "kingdom",
    "province",
    "island",
    "river",
    "street",
    "inn",
    "hotel",
    "restaurant",
    "temple",
    "shrine",
    "church",
    "school",
    "university",
    "college",
    "newspaper",
    "magazine",
    "book",
    "play",
    "poem",
    "song",
    "ship",
];
/// Auxiliary verbs: after "what" they start the clause ("what does the Queen …"), so no noun
/// follows for [`which_asks`].
const AUXILIARIES: &[&str] = &[
    "is", "was", "are", "were", "do", "does", "did", "has", "had", "have", "would", "will", "can",
    "could", "should", "shall", "might", "may", "must",
];
/// Words that may stand between "which" / "what" and the noun of [`WHO_NOUNS`].
const WHO_BETWEEN: &[&str] = &["one", "two", "three", "other", "of", "the", "young", "old"];
/// Chinese question words that ask for a name.
const NAME_ASKS_ZH: &[&str] = &["谁", "何人", "哪位", "名字", "叫什么", "何名", "名唤"];
/// English words that ask for words said, written or sung.
const WORDS_ASKS: &[&str] = &[
    "say",
    "says",
    "said",
    "saying",
    "shout",
    "shouts",
    "shouted",
    "exclaim",
    "exclaims",
    "exclaimed",
    "cry",
    "cries",
    "ask",
    "asks",
    "call",
    "calls",
    "whisper",
    "whispers",
    "reply",
    "replies",
    "tell",
    "tells",
    "written",
    "write",
    "writes",
    "words",
    "printed",
    "label",
    "labelled",
    "message",
    "riddle",
    "rule",
    "motto",
    "song",
    "sing",
    "sings",
    "poem",
    "verse",
];
/// Chinese words that ask for words said, written or sung.
const WORDS_ASKS_ZH: &[&str] = &["说", "道", "问", "写", "题", "诗", "对联", "匾", "答", "唱"];
/// English words that ask for a cause.
const REASON_ASKS: &[&str] = &["why"];
/// English words that ask what someone is doing (before [`WORDS_ASKS`]: "what does Pat say he
/// is doing?" asks for the doing, not for words).
const DOING_ASKS: &[&str] = &["doing"];
/// Chinese question words that ask for a cause.
const REASON_ASKS_ZH: &[&str] = &["为什么", "为何", "何故", "因何"];

/// What `question` asks for ([`Wants`]): the first of number, name, reason, words whose
/// question words it holds (English as whole words, Chinese anywhere).
pub fn wants(question: &str) -> Wants {
    let has = |en: &[&str], zh: &[&str]| holds_phrase(question, en, zh);
    if has(NUMBER_ASKS, NUMBER_ASKS_ZH) {
        Wants::Number
    } else if has(NAME_ASKS, NAME_ASKS_ZH) {
        Wants::Name
    } else if let Some(w) = which_asks(question) {
        w
    } else if has(REASON_ASKS, REASON_ASKS_ZH) {
        Wants::Reason
    } else if has(DOING_ASKS, &[]) {
        Wants::Doing
    } else if has(WORDS_ASKS, WORDS_ASKS_ZH) {
        Wants::Words
    } else {
        Wants::Any
    }
}

/// English words by which a question asks for a name as such ("what is the name of …", "what
/// is the Hatter's real name?"), not only for someone ("who …").
const NAME_WORDS: &[&str] = &["name", "named", "names", "surname"];
/// English words that ask for someone rather than a name as such ("Whose name does the White
/// Rabbit call out …?" asks for the witness).
const WHO_ASKS: &[&str] = &["who", "whom", "whose"];

/// English words by which a text gives a name as a name: the name word itself and the verbs of
/// naming. Plain words, as [`plain_words`] reads them (`call'd`), case ignored.
const NAMING_WORDS: &[&str] = &[
    "name",
    "names",
    "named",
    "surname",
    "surnamed",
    "nickname",
    "nicknamed",
    "christened",
    "call",
    "calls",
    "called",
    "call'd",
    "calling",
];
/// Titles that only come before a name (`Mr. Yoshikawa`, `Miss Su-chan`), as written: `miss`
/// and `dr` are other words in lower case.
const NAME_TITLES: &[&str] = &["Mr", "Mrs", "Miss", "Dr", "Mister"];

/// Does the English `text` give a name as a name (the name word, a verb of naming or a title
/// before a name: "a brass plate with the name `W. RABBIT'", "call'd Antonio", "Mr.
/// Yoshikawa")? A question that asks for a name as such ([`names_asked`]) is not answered by a
/// span that only mentions someone: asked for the name of the narrator's brother, "My brother
/// was to be seen studying English hard" names a language, not him.
pub fn gives_a_name(text: &str) -> bool {
    let lower = text.to_lowercase();
    let words: Vec<&str> = plain_words(&lower).collect();
    let naming = words.iter().enumerate().any(|(i, w)| {
        NAMING_WORDS.contains(w)
            && !(w.starts_with("call")
                && words.get(i + 1).is_some_and(|n| CALL_PARTICLES.contains(n)))
    });
    naming
        || holds_phrase(text, &["known as"], &[])
        || plain_words(text).any(|w| NAME_TITLES.contains(&w))
}

/// Words after "call" that make it another verb than naming: "called out `First witness!'",
/// "called after her", "called for the executioner" name no one.
const CALL_PARTICLES: &[&str] = &[
    "out", "to", "after", "for", "back", "upon", "on", "up", "in", "aloud", "over", "off", "at",
    "across",
];

/// Does the English `question` ask for a name as such (`NAME_WORDS`, and not "who …": "Who
/// tells Hamlet … a land worth nothing except its name?" asks for someone)? Its answer must be
/// a name the evidence gives: the reader abstains when the best span gives none
/// ([`super::reader::kind_shortfall`]). The question's first question word decides: in "What
/// is the name of the King of Tunis whom Claribel married?" "whom" only relates.
pub fn names_asked(question: &str) -> bool {
    let lower = question.to_lowercase();
    let first_asking = plain_words(&lower).find(|w| QUESTION_WORDS.contains(w));
    holds_phrase(question, NAME_WORDS, &[]) && !first_asking.is_some_and(|w| WHO_ASKS.contains(&w))
}

/// English question words, the first of which says what a question asks ([`names_asked`]).
const QUESTION_WORDS: &[&str] = &[
    "who", "whom", "whose", "what", "which", "where", "when", "why", "how",
];

/// What `question` asks for when it asks "which …" or "what …" of a noun: a name when the
/// noun is someone ([`WHO_NOUNS`]: "which character says …", "which of Hamlet's two old
/// school friends …"), a named place or work when it is one of [`NAMED_NOUNS`] ("to which
/// town …"). The noun is one of the two words after the question word, less [`WHO_BETWEEN`]'s
/// words and an owner's possessive (`Hamlet's`), and before an auxiliary verb ("what does the
/// Queen …" asks of no noun).
fn which_asks(question: &str) -> Option<Wants> {
    let lower = question.to_lowercase();
    let words: Vec<&str> = plain_words(&lower).collect();
    let mut named = false;
    for (i, w) in words.iter().enumerate() {
        if *w != "which" && *w != "what" {
            continue;
        }
        let head: Vec<&str> = words[i + 1..]
            .iter()
            .copied()
            .filter(|n| !WHO_BETWEEN.contains(n) && !n.ends_with("'s") && !n.ends_with("s'"))
            .take_while(|n| !AUXILIARIES.contains(n))
            .take(2)
            .collect();
        if head.iter().any(|n| WHO_NOUNS.contains(n)) {
            return Some(Wants::Name);
        }
        named |= head.iter().any(|n| NAMED_NOUNS.contains(n));
    }
    named.then_some(Wants::Named)
}

/// Does `text` hold one of the English phrases `en` as whole words (case ignored) or one of
/// the Chinese ones `zh` anywhere?
pub(super) fn holds_phrase(text: &str, en: &[&str], zh: &[&str]) -> bool {
    let lower = text.to_lowercase();
    let padded = format!(" {} ", plain_words(&lower).collect::<Vec<_>>().join(" "));
    en.iter().any(|w| padded.contains(&format!(" {w} "))) || zh.iter().any(|w| text.contains(w))
}

/// The words of `text` as written (runs of letters, digits, `-` and `'`), no word left out.
pub(super) fn plain_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '\''))
        .filter(|w| !w.is_empty())
}

/// The quotations in `text`: the text between an opening mark (`` ` `` `"` `“` `‘` `「` `『`)
/// and its closing mark (`'` after a backtick, as *Alice* writes; an apostrophe inside a
/// word, as in `don't`, does not close).
pub(super) fn quotations(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let close: &[char] = match chars[i].1 {
            '`' | '‘' => &['\'', '’'],
            '"' => &['"'],
            '“' => &['”'],
            '「' => &['」'],
            '『' => &['』'],
            _ => {
                i += 1;
                continue;
            }
        };
        let start = chars[i].0 + chars[i].1.len_utf8();
        let mut j = i + 1;
        let mut end = None;
        while j < chars.len() {
            let c = chars[j].1;
            let next_letter = chars.get(j + 1).is_some_and(|&(_, n)| n.is_alphanumeric());
            if close.contains(&c) && !(c == '\'' && next_letter) {
                end = Some(chars[j].0);
                break;
            }
            j += 1;
        }
        match end {
            Some(e) => {
                out.push(&text[start..e]);
                i = j + 1;
            }
            None => {
                // An unclosed quotation runs to the end of the span.
                out.push(&text[start..]);
                break;
            }
        }
    }
    out
}

/// Determiners and possessives that may open the noun phrase after "the name of".
const FOCUS_SKIP: &[&str] = &[
    "the", "a", "an", "this", "that", "his", "her", "their", "its",
];
/// Words that end the noun phrase after "the name of" (`the captain of the pirate ship`, `the
/// town or village where …`, `the steamer that took …`).
const FOCUS_END: &[&str] = &[
    "of", "in", "on", "at", "to", "for", "by", "with", "from", "into", "upon", "about", "as",
    "that", "who", "whom", "which", "where", "when", "whose", "the", "a", "an", "his", "her",
    "their", "is", "was", "were", "did", "does", "do",
];
/// Words that join two nouns of the phrase (`Ophelia and Laertes's mother`, `the town or
/// village`): neither the head nor its end.
const FOCUS_JOIN: &[&str] = &["and", "or"];
/// Chinese words that ask for a name as such (`薛宝钗的父亲叫什么名字？`).
const NAME_ASKS_AS_SUCH_ZH: &[&str] = &["叫什么名字", "名叫什么", "姓什么", "叫什么名"];
/// A demonstrative and its measure word before the noun (`那个拐子`, `那首歌`).
const DEMONSTRATIVES_ZH: &[&str] = &[
    "那个", "这个", "那位", "这位", "那首", "这首", "那只", "这只", "那", "这",
];
/// Words after "how many" that name no thing a span must repeat: nouns for people and times,
/// which a story often counts under other words (`there's but five upon this isle`, `Thirty
/// fellows …`), and words that are not the noun counted (`how many more …`, `how many of …`).
const COUNTED_LOOSELY: &[&str] = &["people", "persons", "times", "more", "of", "other", "ones"];
/// Colour words, of which a span that answers "what colour …" holds one (English has few, and
/// a story names them plainly: `His beard was grizzled`, `sable silver'd`).
const COLOUR_WORDS: &[&str] = &[
    "red", "white", "black", "blue", "green", "yellow", "brown", "grey", "gray", "pink", "purple",
    "orange", "scarlet", "crimson", "golden", "gold", "silver", "sable", "grizzled", "azure",
    "violet", "auburn", "flaxen", "ruddy", "pale", "dark", "fair",
];
/// Words after "how much" that ask for a sum of money (`How much did the bath cost`, `How much
/// rent did Red Shirt pay`).
const MONEY_ASKS: &[&str] = &[
    "money", "pay", "paid", "pays", "cost", "costs", "earn", "earned", "earns", "rent", "income",
    "salary", "wage", "wages", "price", "fee", "charge", "charged", "owe", "owed", "spend",
    "spent", "sell", "sold", "buy", "bought", "lend", "lent", "borrow", "borrowed",
];
/// Units of money, of which a span that gives a sum holds one (`600 yen`, `three sen`, `three
/// thousand crowns`); `£` `€` `¥` as written; plurals match by their stems
/// ([`super::stems::stem`]: `shillings` → `shill`).
const MONEY_WORDS: &[&str] = &[
    "yen",
    "sen",
    "rin",
    "ryo",
    "crown",
    "ducat",
    "pound",
    "shilling",
    "penny",
    "pence",
    "farthing",
    "guinea",
    "sovereign",
    "dollar",
    "cent",
    "franc",
    "mark",
    "florin",
    "groat",
    "talent",
    "rupee",
    "coin",
    "£",
    "€",
    "¥",
];
/// Words of which a span that gives an age holds one ("how old …", `三岁`).
const AGE_WORDS: &[&str] = &["year", "old", "age", "month"];

/// The thing a question asks about, which a span that answers it must mention: the noun a
/// name is asked for (`the name of Kiyo's nephew` → `nephew`, `王熙凤的母亲叫什么名字` →
/// `母亲`), the noun counted (`how many legs` → `leg`; not one of `COUNTED_LOOSELY`, a noun
/// for someone of `WHO_NOUNS` or an agent noun in -ers / -ors, `dancers`, `sailors`), or the
/// age (`how old` → a word for years or age), a colour (`what colour` → a colour word), or a
/// sum of money (`how much … cost / pay / rent …` → a unit of money).
/// One of the words (English as stems, [`super::stems::stem`]; Chinese as written) must
/// occur; empty when the question names no such thing.
///
/// A span that names someone without saying whose nephew they are does not give the
/// nephew's name: the reader abstains when the best span lacks it
/// ([`super::reader::kind_shortfall`]).
pub fn focus(question: &str) -> Vec<String> {
    let lower = question.to_lowercase();
    let words: Vec<&str> = plain_words(&lower).collect();
    if words.windows(2).any(|w| w == ["how", "old"]) {
        return AGE_WORDS.iter().map(|w| super::stems::stem(w)).collect();
    }
    if words
        .windows(2)
        .any(|w| (w[0] == "what" || w[0] == "which") && (w[1] == "colour" || w[1] == "color"))
    {
        return COLOUR_WORDS.iter().map(|w| super::stems::stem(w)).collect();
    }
    if let Some(i) = words.windows(2).position(|w| w == ["how", "much"]) {
        if words[i + 2..].iter().any(|w| MONEY_ASKS.contains(w)) {
            return MONEY_WORDS.iter().map(|w| super::stems::stem(w)).collect();
        }
    }
    if question.contains("几岁") || question.contains("多少岁") || question.contains("多大年纪")
    {
        return vec!["岁".to_string()];
    }
    if let Some(i) = words.windows(2).position(|w| w == ["how", "many"]) {
        return match words.get(i + 2) {
            Some(n)
                if n.chars().all(|c| c.is_ascii_alphabetic())
                    && !COUNTED_LOOSELY.contains(n)
                    && !WHO_NOUNS.contains(n)
                    && !n.ends_with("ers")
                    && !n.ends_with("ors") =>
            {
                vec![super::stems::stem(n)]
            }
            _ => Vec::new(),
        };
    }
    if names_asked(question) {
        return named_noun(question).into_iter().collect();
    }
    if let Some(at) = NAME_ASKS_AS_SUCH_ZH
        .iter()
        .filter_map(|w| question.find(w))
        .min()
    {
        let before = &question[..at];
        if let Some(of) = before.rfind('的') {
            let mut noun = &before[of + '的'.len_utf8()..];
            if let Some(d) = DEMONSTRATIVES_ZH.iter().find(|d| noun.starts_with(*d)) {
                noun = &noun[d.len()..];
            }
            let n = noun.chars().count();
            if (1..=4).contains(&n) && !noun.chars().any(|c| c.is_ascii() || c.is_whitespace()) {
                return vec![noun.to_string()];
            }
        }
    }
    Vec::new()
}

/// The head noun of the phrase after "name of" in an English question, as a stem: the last
/// word before the phrase ends ([`FOCUS_END`], a comma) or a capitalised word follows a
/// lower-case one (`the poison Claudius put …` → `poison`), an owner's possessive starting
/// the phrase again (`old King Hamlet's father` → `father`, `Ophelia and Laertes's mother` →
/// `mother`).
fn named_noun(question: &str) -> Option<String> {
    let tokens: Vec<&str> = question.split_whitespace().collect();
    let start = tokens.windows(2).position(|w| {
        let name = w[0].to_lowercase();
        (name == "name" || name == "surname" || name == "names") && w[1] == "of"
    })? + 2;
    let mut phrase: Vec<&str> = Vec::new();
    for token in &tokens[start..] {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        let lower = word.to_lowercase();
        if lower.ends_with("'s") || lower.ends_with("s'") {
            // The owner: the noun that follows is the one named.
            phrase.clear();
        } else if FOCUS_JOIN.contains(&lower.as_str()) {
            // Two nouns joined: the one after it, or the owner's possessive, decides.
        } else if !(phrase.is_empty() && FOCUS_SKIP.contains(&lower.as_str())) {
            if FOCUS_END.contains(&lower.as_str()) {
                break;
            }
            phrase.push(word);
        }
        if token.ends_with([',', '?', ';', '.', '!']) {
            break;
        }
    }
    let cut = phrase
        .windows(2)
        .position(|w| w[0].starts_with(char::is_lowercase) && w[1].starts_with(char::is_uppercase))
        .map_or(phrase.len(), |i| i + 1);
    let head = phrase[..cut].last()?;
    Some(super::stems::stem(&head.to_lowercase()))
}

/// The thing whose colour a question asks ("What colour is Alice's dress?" → `dress`, "What
/// colour was the Ghost's beard, as Horatio describes it?" → `beard`, "What colour are the
/// roses?" → `rose`), as a stem; `None` unless it asks "what / which colour".
pub fn coloured(question: &str) -> Option<String> {
    let lower = question.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let at = words.windows(2).position(|w| {
        (w[0] == "what" || w[0] == "which")
            && (w[1].starts_with("colour") || w[1].starts_with("color"))
    })?;
    let mut head: Option<&str> = None;
    for token in &words[at + 2..] {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        if AUXILIARIES.contains(&word) && head.is_none() || FOCUS_SKIP.contains(&word) {
            continue;
        }
        if word.ends_with("'s") || word.ends_with("s'") {
            // The owner: the noun that follows is the one coloured.
            head = None;
        } else if FOCUS_END.contains(&word) {
            break;
        } else {
            head = Some(word);
        }
        if token.ends_with([',', '?', ';', '.', '!']) {
            break;
        }
    }
    head.filter(|h| !h.is_empty()).map(super::stems::stem)
}

/// How many words apart a colour and the thing coloured may stand for the colour to be said
/// of it (`His beard was grizzled`: 2; `splendidly dressed, with a pair of white kid gloves`:
/// 5, the gloves' colour).
pub const COLOUR_REACH: usize = 3;

/// Does `text` say a colour of the thing `noun` (a stem, [`coloured`])? `None` when it does
/// not mention the thing (the clause before may have); else whether a colour word
/// ([`COLOUR_WORDS`]) stands within [`COLOUR_REACH`] words of a mention.
pub fn colour_of(text: &str, noun: &str) -> Option<bool> {
    let lower = text.to_lowercase();
    let stems: Vec<String> = plain_words(&lower)
        .map(|w| {
            let w = w.trim_matches('\'');
            super::stems::stem(w.strip_suffix("'s").unwrap_or(w))
        })
        .collect();
    let colours: Vec<String> = COLOUR_WORDS.iter().map(|w| super::stems::stem(w)).collect();
    let at: Vec<usize> = (0..stems.len())
        .filter(|&i| super::stems::same_stem(&stems[i], noun))
        .collect();
    if at.is_empty() {
        return None;
    }
    Some(
        stems
            .iter()
            .enumerate()
            .any(|(j, w)| colours.contains(w) && at.iter().any(|&i| i.abs_diff(j) <= COLOUR_REACH)),
    )
}

/// Does `text` mention one of the `focus` words ([`focus`]): an English word with the same
/// stem, possessives read as their noun, or the Chinese word as written?
pub fn mentions(text: &str, focus: &[String]) -> bool {
    let lower = text.to_lowercase();
    let stems: Vec<String> = plain_words(&lower)
        .map(|w| {
            let w = w.trim_matches('\'');
            let w = w.strip_suffix("'s").unwrap_or(w);
            super::stems::stem(w)
        })
        .collect();
    focus.iter().any(|f| {
        if f.is_ascii() {
            stems.iter().any(|s| s == f)
        } else {
            text.contains(f.as_str())
        }
    })
}
