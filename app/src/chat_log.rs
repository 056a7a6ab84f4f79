//! The conversation the page keeps: finished and running turns in memory (at most
//! [`MAX_TURNS`]; the oldest go first) and the last [`SAVED_TURNS`] finished ones saved for the
//! next visit. Plain Rust, unit-tested natively; the page renders it (`ui::chat`).

use lorekeeper_engine::answer::Answer;
use serde::{Deserialize, Serialize};

/// Turns the page holds in memory; a longer conversation drops its oldest turns.
pub const MAX_TURNS: usize = 100;
/// Finished turns saved per bundle for the next visit.
pub const SAVED_TURNS: usize = 50;

/// One question and its answer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Turn {
    /// Sequence number (list key).
    pub n: u64,
    /// The question.
    pub question: String,
    /// The finished answer.
    pub answer: Option<Answer>,
    /// Why there is no answer.
    pub error: Option<String>,
    /// Page clock (ms) when the question was sent.
    #[serde(default)]
    pub asked_ms: f64,
    /// Seconds from sending the question to its first generated token, as the reader saw it.
    #[serde(default)]
    pub first_token_s: Option<f64>,
}

impl Turn {
    /// Answered, or failed with a reason: nothing more will arrive for it.
    pub fn finished(&self) -> bool {
        self.answer.is_some() || self.error.is_some()
    }
}

/// Appends a turn numbered after the last one, dropping the oldest beyond [`MAX_TURNS`];
/// returns its number.
pub fn push_turn(turns: &mut Vec<Turn>, mut t: Turn) -> u64 {
    t.n = turns.last().map_or(0, |l| l.n + 1);
    let n = t.n;
    turns.push(t);
    if turns.len() > MAX_TURNS {
        let extra = turns.len() - MAX_TURNS;
        turns.drain(..extra);
    }
    n
}

/// What is saved for the next visit: the last [`SAVED_TURNS`] answered turns.
pub fn to_save(turns: &[Turn]) -> Vec<&Turn> {
    let done: Vec<&Turn> = turns.iter().filter(|t| t.answer.is_some()).collect();
    let from = done.len().saturating_sub(SAVED_TURNS);
    done[from..].to_vec()
}

/// The answer streaming into the running turn: kept apart from [`Turn`] so a token updates
/// one line of the page, not the whole conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    /// Answer text streamed so far.
    pub streamed: String,
    /// Characters of raw model output so far.
    pub raw_chars: usize,
    /// Seconds to the first token, once it came.
    pub first_token_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Answer {
        serde_json::from_str(
            r#"{"mode":"grounded","question":"q","rounds":[],"final_action":"abstain","answer":"",
                "facts":[],"abstain_reason":null,"snippets":[],"grammar":true,"evidence":[],
                "timings":{"retrieval_ms":0,"prefill_s":0,"decode_s":0,"masks":0,"mask_ms_mean":0,
                "mask_ms_max":0,"total_s":0}}"#,
        )
        .expect("an answer")
    }

    fn asked(q: &str) -> Turn {
        Turn {
            question: q.into(),
            ..Turn::default()
        }
    }

    #[test]
    fn memory_is_bounded_and_numbers_keep_counting() {
        let mut turns = Vec::new();
        for i in 0..(MAX_TURNS + 37) {
            let n = push_turn(&mut turns, asked(&format!("q{i}")));
            assert_eq!(n, i as u64);
        }
        assert_eq!(turns.len(), MAX_TURNS);
        // The oldest went first; the newest is last, with its own number.
        assert_eq!(turns[0].question, "q37");
        assert_eq!(turns[0].n, 37);
        assert_eq!(turns.last().map(|t| t.n), Some((MAX_TURNS + 36) as u64));
    }

    #[test]
    fn only_the_last_answered_turns_are_saved() {
        let mut turns = Vec::new();
        for i in 0..80 {
            let mut t = asked(&format!("q{i}"));
            if i % 4 != 3 {
                t.answer = Some(answer());
            } else {
                t.error = Some("stopped".into());
            }
            push_turn(&mut turns, t);
        }
        push_turn(&mut turns, asked("running"));
        let saved = to_save(&turns);
        assert_eq!(saved.len(), SAVED_TURNS);
        assert!(saved.iter().all(|t| t.answer.is_some()));
        assert_eq!(saved.last().map(|t| t.question.as_str()), Some("q78"));
        assert!(turns[3].finished() && !turns.last().is_some_and(Turn::finished));
    }
}
