//! The checks ASA runs after decoding, run on every answer whether or not a grammar shaped it:
//! evidence ids exist, each quote is a verbatim (whitespace-insensitive) span of the evidence it
//! cites, the schema's caps hold, and a fact's key terms appear in its quotes (numbers, kinship
//! and relation words) or in the passages it cites (names). Beyond ASA, the final answer is
//! checked as facts are ([`answer_problems`]): its content words must occur in the passages its
//! facts cite, at least one quote must carry one of them, it must not repeat a span
//! ([`repeated_span`]), and a fact whose quotes only repeat the question grounds nothing.

use serde::Serialize;

use super::evidence::Evidence;
use super::schema::{EvidenceRef, Fact, GroundedAction, NextAction};

/// The caps of ASA's prompt.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Caps {
    /// Characters per quote.
    pub quote_chars: usize,
    /// Citations per fact.
    pub refs_per_fact: usize,
    /// Supported facts.
    pub facts: usize,
    /// Quote characters over the whole answer.
    pub total_quote_chars: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            quote_chars: 80,
            refs_per_fact: 2,
            facts: 6,
            total_quote_chars: 400,
        }
    }
}

/// One citation, checked.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct RefCheck {
    /// Cited id.
    pub evidence_id: String,
    /// The quote.
    pub quote: String,
    /// The id names a passage that was shown.
    pub id_valid: bool,
    /// The quote is a span of that passage.
    pub verified: bool,
}

/// One fact, checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FactCheck {
    /// The claim.
    pub fact: String,
    /// Its citations.
    pub refs: Vec<RefCheck>,
    /// Key terms of the claim that none of its quotes contains.
    pub uncovered_terms: Vec<String>,
    /// Every citation verified, at least one, and no uncovered key term.
    pub verified: bool,
}

/// The verdict on an action.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Checked {
    /// Per fact.
    pub facts: Vec<FactCheck>,
    /// Every problem found, in words (empty when the action passes).
    pub problems: Vec<String>,
}

impl Checked {
    /// No problem found.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
    /// Citations in all.
    pub fn refs(&self) -> usize {
        self.facts.iter().map(|f| f.refs.len()).sum()
    }
    /// Citations whose quote is verified.
    pub fn verified_refs(&self) -> usize {
        self.facts
            .iter()
            .flat_map(|f| &f.refs)
            .filter(|r| r.verified)
            .count()
    }
    /// Citations whose id exists.
    pub fn valid_ids(&self) -> usize {
        self.facts
            .iter()
            .flat_map(|f| &f.refs)
            .filter(|r| r.id_valid)
            .count()
    }
}

/// `s` without any whitespace (the quote check ignores whitespace, as ASA's does).
pub fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Is `quote` a span of `evidence`, whitespace ignored? (An empty quote is not.)
pub fn quote_in(quote: &str, evidence: &str) -> bool {
    let q = squash(quote);
    !q.is_empty() && squash(evidence).contains(&q)
}

/// Kinship and relation words whose presence in a fact must be backed by a quote (ASA's
/// "relation terms"): a fact that says "her sister" needs a quote that says so.
const RELATIONS: &[&str] = &[
    "father",
    "mother",
    "sister",
    "brother",
    "daughter",
    "son",
    "wife",
    "husband",
    "aunt",
    "uncle",
    "cousin",
    "grandmother",
    "grandfather",
    "married",
    "killed",
    "murdered",
    "servant",
    "master",
    "queen",
    "king",
    "父亲",
    "母亲",
    "父",
    "母",
    "姐姐",
    "妹妹",
    "哥哥",
    "弟弟",
    "女儿",
    "儿子",
    "妻",
    "丈夫",
    "舅舅",
    "姑妈",
    "姨妈",
    "表哥",
    "表妹",
    "祖母",
    "老太太",
    "丫鬟",
    "丫头",
    "奶奶",
    "太太",
    "老爷",
    "嫁",
    "娶",
    "死",
];

/// Words that start sentences or are capitalised for other reasons than naming.
pub(crate) const NOT_NAMES: &[&str] = &[
    "The", "A", "An", "In", "On", "At", "She", "He", "It", "They", "This", "That", "These",
    "Those", "When", "Then", "But", "And", "Her", "His", "Their", "There", "Yes", "No", "Not",
    "After", "Before", "As", "So", "If", "Of", "To", "With", "For", "From", "By", "I", "We", "You",
    "Its", "One", "Once",
];

/// The key terms of a fact: capitalised names, initials (`W. RABBIT`) and numbers (English)
/// and relation words.
pub fn key_terms(fact: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut rest = fact;
    for w in fact.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-')) {
        // What follows the word: an initial is a lone capital and a full stop.
        let after = rest.find(w).map_or("", |i| &rest[i + w.len()..]);
        rest = after;
        let w = w.trim_matches(|c| c == '\'' || c == '-');
        if w.is_empty() || !w.is_ascii() {
            continue;
        }
        let first = w.chars().next().unwrap_or(' ');
        let initial = w.len() == 1 && after.starts_with(". ");
        let is_name =
            first.is_ascii_uppercase() && !NOT_NAMES.contains(&w) && (w.len() > 1 || initial);
        let is_number = w.chars().all(|c| c.is_ascii_digit());
        let is_relation = RELATIONS.contains(&w.to_lowercase().as_str());
        if (is_name || is_number || is_relation) && !terms.iter().any(|t: &String| t == w) {
            terms.push(w.to_string());
        }
    }
    for r in RELATIONS.iter().filter(|r| !r.is_ascii()) {
        if fact.contains(r) && !terms.iter().any(|t| t.contains(r)) {
            terms.push(r.to_string());
        }
    }
    terms
}

/// Content words of a fact, lowercased: ASCII words of 4+ letters that are not function words,
/// and CJK character bigrams.
pub fn content_words(fact: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "that", "this", "with", "from", "have", "were", "when", "what", "which", "there", "their",
        "they", "them", "then", "than", "into", "been", "said", "says", "very", "about", "would",
        "could", "should", "also", "only", "does", "because", "after", "before", "while", "where",
        "who", "whom", "some", "more", "most", "such", "just", "over", "again", "once", "here",
        "both", "each", "other", "your",
    ];
    let mut out: Vec<String> = Vec::new();
    for w in fact.split(|c: char| !c.is_ascii_alphanumeric()) {
        let w = w.to_ascii_lowercase();
        if w.len() >= 4 && !STOP.contains(&w.as_str()) && !out.contains(&w) {
            out.push(w);
        }
    }
    // Bigrams within runs of CJK letters: punctuation between two characters ends a run (a
    // bigram across `，` is no word and occurs nowhere in the text).
    let chars: Vec<char> = fact.chars().collect();
    let letter = |c: &char| c.is_alphanumeric() && super::prompt::has_cjk(&c.to_string());
    for p in chars.windows(2).filter(|p| p.iter().all(letter)) {
        let b: String = p.iter().collect();
        if !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// Function words a grounded final answer may use beside the evidence's own words (English;
/// CJK function characters are in [`CJK_FUNCTION_CHARS`]). No noun, name or number is here:
/// every word that carries content must come from the evidence.
pub const FUNCTION_WORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "not", "no", "yes", "of", "to", "in", "on", "at", "by",
    "for", "with", "from", "into", "onto", "about", "after", "before", "during", "over", "under",
    "as", "than", "that", "this", "these", "those", "it", "its", "he", "she", "they", "him", "her",
    "them", "his", "their", "who", "whom", "whose", "which", "what", "when", "where", "why", "how",
    "is", "was", "are", "were", "be", "been", "being", "has", "had", "have", "do", "did", "does",
    "so", "because", "then", "also", "very", "one", "two",
];

/// CJK function characters a grounded final answer may use beside the evidence's own.
pub const CJK_FUNCTION_CHARS: &str = "的了是在和与也就都而把被给对向从到为着过他她它们这那个之其所";

/// The passages `refs` cite and their quotes, each lowercased and joined by spaces.
fn cited_and_quoted(refs: &[&EvidenceRef], evidence: &[Evidence]) -> (String, String) {
    let cited: Vec<String> = refs
        .iter()
        .filter_map(|r| evidence.iter().find(|e| e.id == r.evidence_id))
        .map(|e| e.text.to_lowercase())
        .collect();
    let quotes: Vec<String> = refs.iter().map(|r| r.quote.to_lowercase()).collect();
    (cited.join(" "), quotes.join(" "))
}

/// The first run of `n` items that occurs again later in `items` without overlapping.
fn first_repeat<T: PartialEq>(items: &[T], n: usize) -> Option<&[T]> {
    (0..items.len().saturating_sub(n)).find_map(|i| {
        let run = &items[i..i + n];
        (i + n..=items.len() - n)
            .any(|j| &items[j..j + n] == run)
            .then_some(run)
    })
}

/// A span of four or more words (eight or more CJK characters) that occurs twice in `text`
/// without overlapping, if any: the mark of a looping answer.
pub fn repeated_span(text: &str) -> Option<String> {
    let cjk = |c: char| super::prompt::has_cjk(&c.to_string());
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() || cjk(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if let Some(run) = first_repeat(&words, 4) {
        return Some(run.join(" "));
    }
    let chars: Vec<char> = text.chars().filter(|&c| cjk(c)).collect();
    first_repeat(&chars, 8).map(|run| run.iter().collect())
}

/// The words of `text` that carry content, lowercased: [`content_words`] and [`key_terms`].
pub fn answer_terms(text: &str) -> Vec<String> {
    // A CJK bigram that holds a function character joins two words rather than naming one.
    let mut out: Vec<String> = content_words(text)
        .into_iter()
        .filter(|w| !w.chars().any(|c| CJK_FUNCTION_CHARS.contains(c)))
        .collect();
    for t in key_terms(text) {
        let t = t.to_lowercase();
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// What is wrong with an `answer_directly`'s final answer: content words that none of the
/// passages its facts cite contains (the words an unsupported answer adds), no quote carrying
/// any of its content words (the facts do not support it), or a repeated span (a loop).
pub fn answer_problems(action: &GroundedAction, evidence: &[Evidence]) -> Vec<String> {
    let mut problems = Vec::new();
    let answer = action.final_answer.as_str();
    if let Some(span) = repeated_span(answer) {
        problems.push(format!("the final answer repeats itself ({span:?})"));
    }
    let refs: Vec<&EvidenceRef> = action
        .supported_facts
        .iter()
        .flat_map(|f| &f.evidence_refs)
        .collect();
    let (cited, quotes) = cited_and_quoted(&refs, evidence);
    let terms = answer_terms(answer);
    let uncovered: Vec<&String> = terms
        .iter()
        .filter(|t| !cited.contains(t.as_str()))
        .collect();
    if !uncovered.is_empty() {
        let list: Vec<&str> = uncovered.iter().map(|t| t.as_str()).collect();
        problems.push(format!(
            "final answer: terms not in the passages its facts cite: {}",
            list.join(", ")
        ));
    } else if !terms.is_empty() && !terms.iter().any(|t| quotes.contains(t.as_str())) {
        problems.push("final answer: no quote carries any of its words".into());
    }
    problems
}

/// Checks `action` against the `evidence` shown, the `caps` and the `question` it answers.
pub fn check(
    action: &GroundedAction,
    evidence: &[Evidence],
    caps: &Caps,
    question: &str,
) -> Checked {
    let mut problems = Vec::new();
    let mut facts = Vec::new();
    let mut quote_chars = 0usize;
    if action.supported_facts.len() > caps.facts {
        problems.push(format!(
            "{} supported facts (at most {})",
            action.supported_facts.len(),
            caps.facts
        ));
    }
    let asked = answer_terms(question);
    for (fi, f) in action.supported_facts.iter().enumerate() {
        let (mut fact, chars) = check_fact(fi + 1, f, evidence, caps, &mut problems);
        if restates(f, &asked) {
            problems.push(format!(
                "fact {}: its quotes only repeat the question",
                fi + 1
            ));
            fact.verified = false;
        }
        quote_chars += chars;
        facts.push(fact);
    }
    if quote_chars > caps.total_quote_chars {
        problems.push(format!(
            "{quote_chars} quote characters in all (at most {})",
            caps.total_quote_chars
        ));
    }
    check_fields(action, &mut problems);
    if action.next_action == NextAction::AnswerDirectly && !action.final_answer.trim().is_empty() {
        problems.extend(answer_problems(action, evidence));
    }
    Checked { facts, problems }
}

/// Do the quotes of `f` carry no content word beyond the question's (`asked`)? A quote such
/// as a character's name taken from the question grounds nothing.
fn restates(f: &Fact, asked: &[String]) -> bool {
    let words: Vec<String> = f
        .evidence_refs
        .iter()
        .flat_map(|r| answer_terms(&r.quote))
        .collect();
    !f.evidence_refs.is_empty() && words.iter().all(|w| asked.contains(w))
}

/// Checks fact number `n` (its citations, key terms and grounding), adding what is wrong to
/// `problems`; returns the verdict and the characters its quotes take.
fn check_fact(
    n: usize,
    f: &Fact,
    evidence: &[Evidence],
    caps: &Caps,
    problems: &mut Vec<String>,
) -> (FactCheck, usize) {
    if f.fact.trim().is_empty() {
        problems.push(format!("fact {n} is empty"));
    }
    if f.evidence_refs.is_empty() {
        problems.push(format!("fact {n} cites no evidence"));
    }
    if f.evidence_refs.len() > caps.refs_per_fact {
        problems.push(format!(
            "fact {n} has {} citations (at most {})",
            f.evidence_refs.len(),
            caps.refs_per_fact
        ));
    }
    let (refs, quote_chars) = check_refs(n, f, evidence, caps, problems);
    // Numbers and relation words must be in the quotes; a name may instead be in a cited
    // passage (the quote often leaves out the subject the passage is about).
    let cites: Vec<&EvidenceRef> = f.evidence_refs.iter().collect();
    let (cited, quotes) = cited_and_quoted(&cites, evidence);
    let uncovered: Vec<String> = key_terms(&f.fact)
        .into_iter()
        .filter(|t| {
            let lt = t.to_lowercase();
            let name = t.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && !RELATIONS.contains(&lt.as_str());
            !(quotes.contains(&lt) || (name && cited.contains(&lt)))
        })
        .collect();
    if !uncovered.is_empty() {
        problems.push(format!(
            "fact {n}: key terms not in its quotes: {}",
            uncovered.join(", ")
        ));
    }
    // A third of the fact's content words (CJK: character bigrams) must occur in what it cites.
    let words = content_words(&f.fact);
    let found = words.iter().filter(|w| cited.contains(w.as_str())).count();
    let grounded = words.is_empty() || found * 3 >= words.len();
    if !grounded && !f.evidence_refs.is_empty() {
        problems.push(format!(
            "fact {n}: only {found} of its {} content words are in the passages it cites",
            words.len()
        ));
    }
    let verified =
        !refs.is_empty() && refs.iter().all(|r| r.verified) && uncovered.is_empty() && grounded;
    let fact = FactCheck {
        fact: f.fact.clone(),
        refs,
        uncovered_terms: uncovered,
        verified,
    };
    (fact, quote_chars)
}

/// Checks the citations of fact number `n` (ids exist, quotes verbatim and within their cap),
/// adding what is wrong to `problems`; returns them and the characters their quotes take.
fn check_refs(
    n: usize,
    f: &Fact,
    evidence: &[Evidence],
    caps: &Caps,
    problems: &mut Vec<String>,
) -> (Vec<RefCheck>, usize) {
    let mut quote_chars = 0usize;
    let mut refs = Vec::new();
    for r in &f.evidence_refs {
        let ev = evidence.iter().find(|e| e.id == r.evidence_id);
        let verified = ev.map(|e| quote_in(&r.quote, &e.text)).unwrap_or(false);
        let chars = r.quote.chars().count();
        quote_chars += chars;
        if ev.is_none() {
            problems.push(format!(
                "fact {n} cites unknown evidence id {:?}",
                r.evidence_id
            ));
        } else if !verified {
            problems.push(format!(
                "fact {n}: quote {:?} is not in {}",
                r.quote, r.evidence_id
            ));
        }
        if chars > caps.quote_chars {
            problems.push(format!(
                "fact {n}: a quote of {chars} characters (at most {})",
                caps.quote_chars
            ));
        }
        refs.push(RefCheck {
            evidence_id: r.evidence_id.clone(),
            quote: r.quote.clone(),
            id_valid: ev.is_some(),
            verified,
        });
    }
    (refs, quote_chars)
}

/// Checks that the action has the fields its `next_action` needs.
fn check_fields(action: &GroundedAction, problems: &mut Vec<String>) {
    match action.next_action {
        NextAction::AnswerDirectly => {
            if action.supported_facts.is_empty() {
                problems.push("answer_directly without a supported fact".into());
            }
            if action.final_answer.trim().is_empty() {
                problems.push("answer_directly with an empty final_answer".into());
            }
        }
        NextAction::ClarifyUser => {
            if action
                .clarification_question
                .as_deref()
                .map(str::trim)
                .unwrap_or("")
                .is_empty()
            {
                problems.push("clarify_user without a clarification_question".into());
            }
        }
        NextAction::RetrieveMore | NextAction::Abstain => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cjk_bigrams_do_not_cross_punctuation() {
        let w = content_words("只有一女，乳名英莲。");
        assert!(w.contains(&"英莲".to_string()), "{w:?}");
        assert!(
            !w.iter()
                .any(|b| b.contains('，') || b == "女乳" || b == "莲。"),
            "{w:?}"
        );
    }

    use super::*;

    fn ev(id: &str, text: &str) -> Evidence {
        Evidence {
            id: id.into(),
            chunk: 0,
            chapter: "CHAPTER I".into(),
            text: text.into(),
            fusion_score: 0.03,
        }
    }

    fn answer(facts: Vec<(&str, Vec<(&str, &str)>)>) -> GroundedAction {
        GroundedAction {
            next_action: NextAction::AnswerDirectly,
            supported_facts: facts
                .into_iter()
                .map(|(f, refs)| Fact {
                    fact: f.into(),
                    evidence_refs: refs
                        .into_iter()
                        .map(|(id, q)| EvidenceRef {
                            evidence_id: id.into(),
                            quote: q.into(),
                        })
                        .collect(),
                })
                .collect(),
            inferred_facts: vec![],
            final_answer: "a watch".into(),
            follow_up_hypothesis: None,
            clarification_question: None,
        }
    }

    fn evidence() -> Vec<Evidence> {
        vec![
            ev(
                "E1",
                "the Rabbit actually took a watch out of its waistcoat-pocket, and looked at it",
            ),
            ev("E2", "宝玉笑道：“好妹妹，你别恼。”"),
        ]
    }

    const Q: &str = "What did the Rabbit take out of its pocket?";

    #[test]
    fn a_good_answer_passes() {
        let a = answer(vec![(
            "The Rabbit took a watch out of its pocket.",
            vec![("E1", "took a watch out of its waistcoat-pocket")],
        )]);
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert!(c.ok(), "{:?}", c.problems);
        assert_eq!((c.refs(), c.verified_refs(), c.valid_ids()), (1, 1, 1));
        assert!(c.facts[0].verified);
    }

    #[test]
    fn whitespace_is_ignored_in_quotes() {
        assert!(quote_in(
            "took a  watch\nout",
            "the Rabbit took a watch out"
        ));
        assert!(quote_in("好 妹妹", "宝玉笑道：“好妹妹，你别恼。”"));
        assert!(!quote_in("", "anything"));
        assert!(!quote_in("   ", "anything"));
    }

    #[test]
    fn unknown_ids_bad_quotes_and_caps_are_reported() {
        let a = answer(vec![
            ("Rabbit watch", vec![("E9", "took a watch")]),
            ("Rabbit watch", vec![("E1", "took a clock")]),
            ("Rabbit", vec![("E1", &"x".repeat(81))]),
            ("", vec![]),
        ]);
        let c = check(&a, &evidence(), &Caps::default(), Q);
        let all = c.problems.join("\n");
        assert!(all.contains("unknown evidence id \"E9\""), "{all}");
        assert!(all.contains("quote \"took a clock\" is not in E1"), "{all}");
        assert!(all.contains("a quote of 81 characters"), "{all}");
        assert!(all.contains("fact 4 is empty"), "{all}");
        assert!(all.contains("fact 4 cites no evidence"), "{all}");
        assert_eq!((c.refs(), c.verified_refs(), c.valid_ids()), (3, 0, 2));
        let many = answer(vec![("x", vec![("E1", "watch")]); 7]);
        let c = check(&many, &evidence(), &Caps::default(), Q);
        assert!(
            c.problems.iter().any(|p| p.contains("7 supported facts")),
            "{:?}",
            c.problems
        );
        let refs = answer(vec![(
            "x",
            vec![("E1", "watch"), ("E1", "Rabbit"), ("E1", "looked")],
        )]);
        let c = check(&refs, &evidence(), &Caps::default(), Q);
        assert!(
            c.problems.iter().any(|p| p.contains("3 citations")),
            "{:?}",
            c.problems
        );
    }

    #[test]
    fn key_terms_must_be_quoted() {
        // "Duchess" and "sister" are not in the quote: the fact is not verified.
        let a = answer(vec![(
            "The Duchess's sister took a watch.",
            vec![("E1", "took a watch")],
        )]);
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert!(!c.ok());
        assert_eq!(
            c.facts[0].uncovered_terms,
            vec!["Duchess's".to_string(), "sister".into()]
        );
        assert!(!c.facts[0].verified);
        let mut zh = answer(vec![("宝玉叫妹妹别恼", vec![("E2", "好妹妹")])]);
        zh.final_answer = "宝玉的好妹妹".into();
        let c = check(&zh, &evidence(), &Caps::default(), Q);
        assert!(c.ok(), "{:?}", c.problems);
        let zh = answer(vec![("宝玉叫姐姐别恼", vec![("E2", "好妹妹")])]);
        let c = check(&zh, &evidence(), &Caps::default(), Q);
        assert_eq!(c.facts[0].uncovered_terms, vec!["姐姐".to_string()]);
    }

    #[test]
    fn facts_must_share_words_with_what_they_cite() {
        let a = answer(vec![(
            "A barrel of gold is worth more than silver.",
            vec![("E1", "took a watch")],
        )]);
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert!(
            c.problems
                .iter()
                .any(|p| p.contains("0 of its 4 content words")),
            "{:?}",
            c.problems
        );
        assert!(!c.facts[0].verified);
        assert_eq!(
            content_words("宝玉笑了 the watch"),
            vec!["watch", "宝玉", "玉笑", "笑了"]
        );
    }

    #[test]
    fn key_terms_examples() {
        assert_eq!(
            key_terms("Alice was 7 and her sister read."),
            vec!["Alice", "7", "sister"]
        );
        assert_eq!(key_terms("The Queen said so."), vec!["Queen"]);
        assert!(key_terms("she ran away").is_empty());
        // An initial is a name's term; a lone capital that is no initial is not.
        assert_eq!(key_terms("the name `W. RABBIT' on it"), vec!["W", "RABBIT"]);
        assert_eq!(key_terms("O Mouse, do you know"), vec!["Mouse"]);
    }

    #[test]
    fn actions_need_their_fields() {
        let mut a = answer(vec![]);
        a.final_answer.clear();
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert_eq!(c.problems.len(), 2, "{:?}", c.problems);
        let mut a = GroundedAction::abstain("not enough");
        assert!(check(&a, &evidence(), &Caps::default(), Q).ok());
        a.next_action = NextAction::ClarifyUser;
        assert!(!check(&a, &evidence(), &Caps::default(), Q).ok());
    }

    #[test]
    fn the_final_answer_is_checked_like_a_fact() {
        let fact = vec![(
            "The Rabbit took a watch out of its pocket.",
            vec![("E1", "took a watch out of its waistcoat-pocket")],
        )];
        // Words the cited passage never says: unsupported.
        let mut a = answer(fact.clone());
        a.final_answer = "A golden clock from the island of Tortuga.".into();
        let c = check(&a, &evidence(), &Caps::default(), Q);
        let all = c.problems.join("\n");
        assert!(
            all.contains(
                "terms not in the passages its facts cite: golden, clock, island, tortuga"
            ),
            "{all}"
        );
        // In the passage but in no quote: the facts do not support it.
        a.final_answer = "It looked.".into();
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert_eq!(
            c.problems,
            vec!["final answer: no quote carries any of its words".to_string()]
        );
        // A loop.
        a.final_answer = "a watch out of its pocket, a watch out of its pocket".into();
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert!(
            c.problems
                .iter()
                .any(|p| p.contains("repeats itself (\"a watch out of\")")),
            "{:?}",
            c.problems
        );
        // Function words and the quoted words: supported.
        a.final_answer = "The Rabbit took a watch.".into();
        assert!(check(&a, &evidence(), &Caps::default(), Q).ok());
    }

    #[test]
    fn a_quote_that_only_repeats_the_question_grounds_nothing() {
        let mut a = answer(vec![("The Rabbit.", vec![("E1", "the Rabbit")])]);
        a.final_answer = "the Rabbit".into();
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert!(!c.facts[0].verified);
        assert!(
            c.problems
                .iter()
                .any(|p| p == "fact 1: its quotes only repeat the question"),
            "{:?}",
            c.problems
        );
        // A quote of function words only grounds nothing either.
        let a = answer(vec![("It was so.", vec![("E1", "it")])]);
        let c = check(&a, &evidence(), &Caps::default(), Q);
        assert!(!c.facts[0].verified, "{:?}", c.problems);
    }

    #[test]
    fn repeated_spans() {
        assert_eq!(
            repeated_span("I am a cat. I am a cat. I am a cat."),
            Some("i am a cat".into())
        );
        assert_eq!(repeated_span("a White Rabbit with pink eyes"), None);
        // Overlapping occurrences are not a repeat.
        assert_eq!(repeated_span("one two three four five"), None);
        assert_eq!(
            repeated_span("宝玉笑道好妹妹你别恼宝玉笑道好妹妹你别恼"),
            Some("宝玉笑道好妹妹你".into())
        );
        assert_eq!(repeated_span("宝玉笑道好妹妹你别恼"), None);
    }
}
