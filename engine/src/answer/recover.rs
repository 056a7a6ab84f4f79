//! Parsing the model's JSON, and ASA's truncation recovery for unconstrained output: when the
//! text does not parse (cut off by the token budget, or malformed), pull out `next_action`, a
//! closed `final_answer` string and every complete fact object, and mark the result recovered.

use serde::Serialize;

use super::schema::{Fact, GroundedAction, NextAction};

/// How the action was obtained from the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseOutcome {
    /// The text parsed as `grounded_action_v1` as written.
    Parsed,
    /// It did not; the action was recovered from its pieces (`recovered_from_truncated_json`).
    Recovered,
    /// Nothing usable.
    Failed,
}

/// The first JSON object in `text` (leading prose and trailing text after it are ignored,
/// as are Markdown fences), parsed as an action.
fn parse_strict(text: &str) -> Option<GroundedAction> {
    let start = text.find('{')?;
    let mut de = serde_json::Deserializer::from_str(&text[start..]).into_iter::<GroundedAction>();
    de.next()?.ok()
}

/// The string value that follows `"key"` and `:` in `text`, if it is closed.
fn closed_string(text: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\"");
    let at = text.find(&pat)? + pat.len();
    let rest = text[at..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    if !rest.starts_with('"') {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
    de.next()?.ok()
}

/// Every complete `{"fact": …}` object in `text`, in order.
fn complete_facts(text: &str) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("{\"fact\"") {
        let at = from + i;
        let mut de = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Fact>();
        match de.next() {
            Some(Ok(f)) => {
                out.push(f);
                from = at + de.byte_offset().max(1);
            }
            _ => from = at + 1,
        }
    }
    out
}

/// Parses `text`; when strict parsing fails, recovers what it can. A recovered
/// `answer_directly` without a closed answer or any complete fact becomes `Failed`.
pub fn parse_action(text: &str) -> (Option<GroundedAction>, ParseOutcome) {
    if let Some(a) = parse_strict(text) {
        return (Some(a), ParseOutcome::Parsed);
    }
    let action = closed_string(text, "next_action")
        .and_then(|s| serde_json::from_value::<NextAction>(serde_json::Value::String(s)).ok());
    let Some(next_action) = action else {
        return (None, ParseOutcome::Failed);
    };
    let final_answer = closed_string(text, "final_answer").unwrap_or_default();
    let facts = complete_facts(text);
    if next_action == NextAction::AnswerDirectly && final_answer.is_empty() && facts.is_empty() {
        return (None, ParseOutcome::Failed);
    }
    let a = GroundedAction {
        next_action,
        supported_facts: facts,
        inferred_facts: Vec::new(),
        final_answer,
        follow_up_hypothesis: None,
        clarification_question: closed_string(text, "clarification_question"),
    };
    (Some(a), ParseOutcome::Recovered)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"{"next_action":"answer_directly","supported_facts":[{"fact":"The Rabbit had a watch.","evidence_refs":[{"evidence_id":"E1","quote":"took a watch"}]},{"fact":"It was late.","evidence_refs":[{"evidence_id":"E2","quote":"I shall be too late"}]}],"inferred_facts":[],"final_answer":"A watch."}"#;

    #[test]
    fn whole_json_parses() {
        let (a, o) = parse_action(FULL);
        assert_eq!(o, ParseOutcome::Parsed);
        let a = a.expect("parsed");
        assert_eq!(a.supported_facts.len(), 2);
        assert_eq!(a.final_answer, "A watch.");
        // Prose and fences around it are ignored.
        let (_, o) = parse_action(&format!("Sure:\n```json\n{FULL}\n```\n"));
        assert_eq!(o, ParseOutcome::Parsed);
    }

    #[test]
    fn every_truncation_recovers_or_fails_cleanly() {
        // Cut the text at every character boundary: never a panic; once next_action is
        // closed, the result is recovered or parsed, with only complete facts.
        let cut_action =
            FULL.find("\"answer_directly\"").unwrap_or(0) + "\"answer_directly\"".len();
        let first_fact_end = FULL.find("}]},").unwrap_or(0) + 3;
        for (i, _) in FULL.char_indices() {
            let (a, o) = parse_action(&FULL[..i]);
            if i < cut_action {
                assert_eq!(o, ParseOutcome::Failed, "cut at {i}");
                continue;
            }
            if o == ParseOutcome::Failed {
                assert!(i < first_fact_end, "cut at {i} lost a complete fact");
                continue;
            }
            let a = a.expect("an action");
            assert_eq!(o, ParseOutcome::Recovered, "cut at {i}");
            assert_eq!(a.next_action, NextAction::AnswerDirectly);
            if i >= first_fact_end {
                assert!(!a.supported_facts.is_empty(), "cut at {i}");
                assert_eq!(a.supported_facts[0].evidence_refs[0].quote, "took a watch");
            }
        }
        let (a, o) = parse_action(&FULL[..FULL.len() - 1]);
        assert_eq!(o, ParseOutcome::Recovered);
        let a = a.expect("recovered");
        assert_eq!(
            (a.supported_facts.len(), a.final_answer.as_str()),
            (2, "A watch.")
        );
    }

    #[test]
    fn broken_outputs() {
        let cases = [
            ("", ParseOutcome::Failed),
            ("I don't know", ParseOutcome::Failed),
            (r#"{"next_action":"dance"}"#, ParseOutcome::Failed),
            (
                r#"{"next_action":"abstain","final_answer":"证据不足"#,
                ParseOutcome::Recovered,
            ),
            (
                r#"{"next_action": "abstain", "final_answer": "证据不足", }"#,
                ParseOutcome::Recovered,
            ),
            (
                r#"{"next_action":"answer_directly","final_answer":"#,
                ParseOutcome::Failed,
            ),
            (
                r#"{"next_action":"retrieve_more","follow_up_hypothesis":{"keywords":["tea"#,
                ParseOutcome::Recovered,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_action(text).1, want, "{text}");
        }
        let (a, _) = parse_action(r#"{"next_action": "abstain", "final_answer": "证据不足", }"#);
        assert_eq!(a.map(|a| a.final_answer), Some("证据不足".to_string()));
    }
}
