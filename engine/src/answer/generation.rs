//! Constrained generation, the stage every protocol shares: the model side of a question
//! ([`Llm`]), one generation under an optional grammar, and the time it took ([`Spent`]).

use super::grammar::{Closers, GrammarVocab};
use super::Timings;
use crate::backend::Backend;
use crate::error::Result;
use crate::generate::{generate_with, Constraint, GenerateOptions, Generation};
use crate::models::Decoder;
use crate::tokenizer::Tokenizer;

/// The model side of a question: the backend, the decoder, its tokenizer and the grammar
/// vocabulary (`None`: decode freely).
pub struct Llm<'a, B: Backend> {
    /// The backend the decoder runs on.
    pub backend: &'a B,
    /// The decoder.
    pub model: &'a mut Decoder<B>,
    /// Its tokenizer.
    pub tok: &'a Tokenizer,
    /// The grammar vocabulary (needed when constrained decoding is on).
    pub vocab: Option<&'a GrammarVocab>,
}

impl<'a, B: Backend> Llm<'a, B> {
    /// The model side from its parts.
    pub fn new(
        backend: &'a B,
        model: &'a mut Decoder<B>,
        tok: &'a Tokenizer,
        vocab: Option<&'a GrammarVocab>,
    ) -> Self {
        Llm {
            backend,
            model,
            tok,
            vocab,
        }
    }

    /// Generates from `ids`, under `grammar` (Lark text, and how it closes) when this side has
    /// a grammar vocabulary; the time taken and the mask times are added to `spent`.
    pub(crate) async fn generate(
        &mut self,
        ids: &[u32],
        opts: &GenerateOptions,
        grammar: Option<(&str, Closers)>,
        spent: &mut Spent,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<Generation> {
        let mut gc = match self.vocab.zip(grammar) {
            Some((v, (g, closers))) => {
                let mut c = v.constraint(g)?;
                c.closers = closers;
                Some(c)
            }
            None => None,
        };
        let gen = generate_with(
            self.backend,
            self.model,
            self.tok,
            ids,
            opts,
            gc.as_mut().map(|g| g as &mut dyn Constraint),
            on_text,
        )
        .await?;
        if let Some(g) = &gc {
            spent.mask_ms.extend_from_slice(&g.mask_ms);
        }
        spent.prefill_s += gen.prefill_s;
        spent.decode_s += gen.decode_s;
        Ok(gen)
    }
}

/// Time spent generating, over every round or step of a question.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Spent {
    /// Prompt processing, s.
    pub prefill_s: f64,
    /// Generation, s.
    pub decode_s: f64,
    /// Each grammar mask computation, ms.
    pub mask_ms: Vec<f64>,
}

impl Spent {
    /// Writes the generation figures of `t` (prefill, decode and the mask statistics).
    pub fn write(&self, t: &mut Timings) {
        t.prefill_s = self.prefill_s;
        t.decode_s = self.decode_s;
        t.masks = self.mask_ms.len();
        if !self.mask_ms.is_empty() {
            t.mask_ms_mean = self.mask_ms.iter().sum::<f64>() / self.mask_ms.len() as f64;
            t.mask_ms_max = self.mask_ms.iter().cloned().fold(0.0, f64::max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spent_writes_the_mask_statistics() {
        let mut t = Timings::default();
        Spent::default().write(&mut t);
        assert_eq!((t.masks, t.mask_ms_mean, t.mask_ms_max), (0, 0.0, 0.0));
        let s = Spent {
            prefill_s: 0.5,
            decode_s: 2.0,
            mask_ms: vec![1.0, 4.0, 1.0],
        };
        s.write(&mut t);
        assert_eq!((t.prefill_s, t.decode_s), (0.5, 2.0));
        assert_eq!((t.masks, t.mask_ms_mean, t.mask_ms_max), (3, 2.0, 4.0));
    }
}
