//! `grounded_action_v1`: the JSON the model writes (ASA's conclusion schema).
//!
//! ```json
//! {"next_action":"answer_directly",
//!  "supported_facts":[{"fact":"…","evidence_refs":[{"evidence_id":"E1","quote":"…"}]}],
//!  "inferred_facts":[],"final_answer":"…"}
//! {"next_action":"retrieve_more","follow_up_hypothesis":{"keywords":["…"]}}
//! {"next_action":"abstain","final_answer":"…"}
//! {"next_action":"clarify_user","clarification_question":"…"}
//! ```

use serde::{Deserialize, Serialize};

/// What the model decides to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextAction {
    /// Answer from the evidence shown.
    AnswerDirectly,
    /// Search again with `follow_up_hypothesis`.
    RetrieveMore,
    /// The evidence is not enough.
    Abstain,
    /// Ask the user to clarify.
    ClarifyUser,
}

impl NextAction {
    /// The schema's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            NextAction::AnswerDirectly => "answer_directly",
            NextAction::RetrieveMore => "retrieve_more",
            NextAction::Abstain => "abstain",
            NextAction::ClarifyUser => "clarify_user",
        }
    }
}

/// One citation: an evidence id and a verbatim quote from that evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRef {
    /// `E1`, `E2`, … as shown in the evidence brief.
    pub evidence_id: String,
    /// A verbatim span of that evidence.
    pub quote: String,
}

/// A fact stated with its citations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// The claim.
    pub fact: String,
    /// Its support.
    #[serde(default)]
    pub evidence_refs: Vec<EvidenceRef>,
}

/// A search hypothesis (the pipeline's optional first step, and `retrieve_more`'s payload).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    /// What the user wants (free text).
    #[serde(default)]
    pub intent: String,
    /// Kind of question (who / what / why / …).
    #[serde(default)]
    pub query_type: String,
    /// Characters, places, objects named.
    #[serde(default)]
    pub entities: Vec<String>,
    /// Search keywords.
    #[serde(default)]
    pub keywords: Vec<String>,
}

/// The model's conclusion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroundedAction {
    /// The decision.
    pub next_action: NextAction,
    /// Facts with quotes.
    #[serde(default)]
    pub supported_facts: Vec<Fact>,
    /// Conclusions drawn from the facts (not quoted).
    #[serde(default)]
    pub inferred_facts: Vec<String>,
    /// The answer shown to the user.
    #[serde(default)]
    pub final_answer: String,
    /// What to search next (`retrieve_more`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up_hypothesis: Option<Hypothesis>,
    /// The question back to the user (`clarify_user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clarification_question: Option<String>,
}

impl GroundedAction {
    /// An abstention with `answer` as its text.
    pub fn abstain(answer: impl Into<String>) -> Self {
        GroundedAction {
            next_action: NextAction::Abstain,
            supported_facts: Vec::new(),
            inferred_facts: Vec::new(),
            final_answer: answer.into(),
            follow_up_hypothesis: None,
            clarification_question: None,
        }
    }
}
