//! The checks ASA runs after decoding, run on every answer whether or not a grammar shaped it:
//! evidence ids exist, each quote is a verbatim (whitespace-insensitive) span of the evidence it
//! cites, the schema's caps hold, and a fact's key terms appear in its quotes (numbers, kinship
//! and relation words) or in the passages it cites (names).

use serde::Serialize;

use super::evidence::Evidence;
use super::schema::{Fact, GroundedAction, NextAction};

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
const NOT_NAMES: &[&str] = &[
    "The", "A", "An", "In", "On", "At", "She", "He", "It", "They", "This", "That", "These",
    "Those", "When", "Then", "But", "And", "Her", "His", "Their", "There", "Yes", "No", "Not",
    "After", "Before", "As", "So", "If", "Of", "To", "With", "For", "From", "By", "I", "We", "You",
    "Its", "One", "Once",
];

/// The key terms of a fact: capitalised names and numbers (English) and relation words.
pub fn key_terms(fact: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for w in fact.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-')) {
        let w = w.trim_matches(|c| c == '\'' || c == '-');
        if w.is_empty() || !w.is_ascii() {
            continue;
        }
        let first = w.chars().next().unwrap_or(' ');
        let is_name = first.is_ascii_uppercase() && !NOT_NAMES.contains(&w) && w.len() > 1;
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
    let cjk: Vec<char> = fact
        .chars()
        .filter(|c| super::prompt::has_cjk(&c.to_string()))
        .collect();
    for p in cjk.windows(2) {
        let b: String = p.iter().collect();
        if !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// Checks `action` against the `evidence` shown and the `caps`.
pub fn check(action: &GroundedAction, evidence: &[Evidence], caps: &Caps) -> Checked {
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
    for (fi, f) in action.supported_facts.iter().enumerate() {
        let (fact, chars) = check_fact(fi + 1, f, evidence, caps, &mut problems);
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
    Checked { facts, problems }
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
    let quotes: String = f
        .evidence_refs
        .iter()
        .map(|r| r.quote.to_lowercase())
        .collect::<Vec<_>>()
        .join(" ");
    // Numbers and relation words must be in the quotes; a name may instead be in a cited
    // passage (the quote often leaves out the subject the passage is about).
    let cited: String = f
        .evidence_refs
        .iter()
        .filter_map(|r| evidence.iter().find(|e| e.id == r.evidence_id))
        .map(|e| e.text.to_lowercase())
        .collect::<Vec<_>>()
        .join(" ");
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
    use super::super::schema::EvidenceRef;
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

    #[test]
    fn a_good_answer_passes() {
        let a = answer(vec![(
            "The Rabbit took a watch out of its pocket.",
            vec![("E1", "took a watch out of its waistcoat-pocket")],
        )]);
        let c = check(&a, &evidence(), &Caps::default());
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
        let c = check(&a, &evidence(), &Caps::default());
        let all = c.problems.join("\n");
        assert!(all.contains("unknown evidence id \"E9\""), "{all}");
        assert!(all.contains("quote \"took a clock\" is not in E1"), "{all}");
        assert!(all.contains("a quote of 81 characters"), "{all}");
        assert!(all.contains("fact 4 is empty"), "{all}");
        assert!(all.contains("fact 4 cites no evidence"), "{all}");
        assert_eq!((c.refs(), c.verified_refs(), c.valid_ids()), (3, 0, 2));
        let many = answer(vec![("x", vec![("E1", "watch")]); 7]);
        let c = check(&many, &evidence(), &Caps::default());
        assert!(
            c.problems.iter().any(|p| p.contains("7 supported facts")),
            "{:?}",
            c.problems
        );
        let refs = answer(vec![(
            "x",
            vec![("E1", "watch"), ("E1", "Rabbit"), ("E1", "looked")],
        )]);
        let c = check(&refs, &evidence(), &Caps::default());
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
        let c = check(&a, &evidence(), &Caps::default());
        assert!(!c.ok());
        assert_eq!(
            c.facts[0].uncovered_terms,
            vec!["Duchess's".to_string(), "sister".into()]
        );
        assert!(!c.facts[0].verified);
        let zh = answer(vec![("宝玉叫妹妹别恼", vec![("E2", "好妹妹")])]);
        assert!(check(&zh, &evidence(), &Caps::default()).ok());
        let zh = answer(vec![("宝玉叫姐姐别恼", vec![("E2", "好妹妹")])]);
        let c = check(&zh, &evidence(), &Caps::default());
        assert_eq!(c.facts[0].uncovered_terms, vec!["姐姐".to_string()]);
    }

    #[test]
    fn facts_must_share_words_with_what_they_cite() {
        let a = answer(vec![(
            "A barrel of gold is worth more than silver.",
            vec![("E1", "took a watch")],
        )]);
        let c = check(&a, &evidence(), &Caps::default());
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
    }

    #[test]
    fn actions_need_their_fields() {
        let mut a = answer(vec![]);
        a.final_answer.clear();
        let c = check(&a, &evidence(), &Caps::default());
        assert_eq!(c.problems.len(), 2, "{:?}", c.problems);
        let mut a = GroundedAction::abstain("not enough");
        assert!(check(&a, &evidence(), &Caps::default()).ok());
        a.next_action = NextAction::ClarifyUser;
        assert!(!check(&a, &evidence(), &Caps::default()).ok());
    }
}
