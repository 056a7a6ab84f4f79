//! Tokenizer (Hugging Face `tokenizers`, fancy-regex build so the same code runs in wasm) from a
//! `tokenizer.json`, or rebuilt from a GGUF file's own metadata (tokens, merges, token types,
//! pre-tokenizer name), plus the ChatML chat template used by Qwen3 and SmolLM2.

use crate::error::{EngineError, Result};
use crate::format::gguf::{Gguf, Value};

/// A chat message role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// System prompt.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// The ChatML template with the family's conventions.
#[derive(Clone, Debug, Default)]
pub struct ChatTemplate {
    /// System prompt inserted when the conversation has none (SmolLM2's template does this).
    pub default_system: Option<String>,
    /// Qwen3 non-thinking form: the assistant turn opens with an empty `<think></think>` block,
    /// and `<think>…</think>` is stripped from earlier assistant turns.
    pub qwen3_no_think: bool,
}

impl ChatTemplate {
    /// Renders `messages` and opens the assistant turn.
    pub fn render(&self, messages: &[(Role, String)]) -> String {
        let mut s = String::new();
        if messages.first().map(|m| m.0) != Some(Role::System) {
            if let Some(sys) = &self.default_system {
                s.push_str(&format!("<|im_start|>system\n{sys}<|im_end|>\n"));
            }
        }
        for (role, content) in messages {
            let content = if *role == Role::Assistant && self.qwen3_no_think {
                strip_think(content)
            } else {
                content.clone()
            };
            s.push_str(&format!(
                "<|im_start|>{}\n{}<|im_end|>\n",
                role.as_str(),
                content
            ));
        }
        s.push_str("<|im_start|>assistant\n");
        if self.qwen3_no_think {
            s.push_str("<think>\n\n</think>\n\n");
        }
        s
    }
}

/// Removes `<think>…</think>` blocks (and the whitespace after them).
pub fn strip_think(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(a) = rest.find("<think>") {
        out.push_str(&rest[..a]);
        match rest[a..].find("</think>") {
            Some(b) => rest = rest[a + b + "</think>".len()..].trim_start(),
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A tokenizer with its special ids and chat template.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    eos: Vec<u32>,
    bos: Option<u32>,
    add_bos: bool,
    /// Chat template.
    pub chat: ChatTemplate,
}

fn tok_err(source: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Format {
        file: source.into(),
        detail: format!("tokenizer: {e}"),
    }
}

/// Model families whose chat template has Qwen3's thinking switch (turned off here).
fn qwen3_chat(model_type: &str) -> bool {
    matches!(model_type, "qwen3" | "qwen3_5" | "qwen3_5_text")
}

impl Tokenizer {
    /// From `tokenizer.json` bytes. `eos` are the end-of-sequence ids from the model config;
    /// `<|im_end|>` and `<|endoftext|>` are added when the vocabulary has them.
    pub fn from_json(source: &str, json: &[u8], eos: &[u32], family: &str) -> Result<Tokenizer> {
        let inner = tokenizers::Tokenizer::from_bytes(json).map_err(|e| tok_err(source, e))?;
        let mut eos = eos.to_vec();
        for s in ["<|im_end|>", "<|endoftext|>"] {
            if let Some(id) = inner.token_to_id(s) {
                if !eos.contains(&id) {
                    eos.push(id);
                }
            }
        }
        Ok(Tokenizer {
            inner,
            eos,
            bos: None,
            add_bos: false,
            chat: ChatTemplate {
                default_system: None,
                qwen3_no_think: qwen3_chat(family),
            },
        })
    }

    /// Rebuilds the tokenizer from GGUF metadata (`tokenizer.ggml.*`). Byte-level BPE
    /// (`model = gpt2`) with the pre-tokenizers llama.cpp names `smollm`, `qwen2`, `llama-bpe`,
    /// `gpt-2` / `default`; anything else is refused by name.
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer> {
        let src = g.source.as_str();
        let get = |k: &str| g.get(k);
        let model = get("tokenizer.ggml.model")
            .and_then(Value::as_str)
            .unwrap_or("");
        if model != "gpt2" {
            return Err(tok_err(
                src,
                format!("tokenizer model '{model}' is not supported (byte-level BPE 'gpt2' only)"),
            ));
        }
        let tokens: Vec<&str> = get("tokenizer.ggml.tokens")
            .and_then(Value::as_array)
            .ok_or_else(|| tok_err(src, "no tokenizer.ggml.tokens"))?
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect();
        let types: Vec<u64> = get("tokenizer.ggml.token_type")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|v| v.as_u64().unwrap_or(1)).collect())
            .unwrap_or_default();
        let merges: Vec<&str> = get("tokenizer.ggml.merges")
            .and_then(Value::as_array)
            .ok_or_else(|| tok_err(src, "no tokenizer.ggml.merges"))?
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect();
        let pre = get("tokenizer.ggml.pre")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let byte_level = |use_regex: bool| serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
        let split = |re: &str| serde_json::json!({"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false});
        let pre_tokenizer = match pre {
            "smollm" => serde_json::json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            "qwen2" => serde_json::json!({"type": "Sequence", "pretokenizers": [
                split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                byte_level(false)]}),
            "llama-bpe" | "llama3" => serde_json::json!({"type": "Sequence", "pretokenizers": [
                split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                byte_level(false)]}),
            "gpt-2" | "gpt2" | "default" => byte_level(true),
            other => {
                return Err(tok_err(
                    src,
                    format!("pre-tokenizer '{other}' is not supported"),
                ))
            }
        };
        let vocab: serde_json::Map<String, serde_json::Value> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), serde_json::Value::from(i)))
            .collect();
        // Token types: 1 normal, 3 control, 4 user-defined -> added tokens (special for control).
        let added: Vec<serde_json::Value> = tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| matches!(types.get(*i), Some(3) | Some(4)))
            .map(|(i, t)| {
                serde_json::json!({"id": i, "content": t, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": types.get(i) == Some(&3)})
            })
            .collect();
        let json = serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                "vocab": vocab, "merges": merges}
        });
        let bytes = serde_json::to_vec(&json).map_err(|e| tok_err(src, e))?;
        let inner = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| tok_err(src, e))?;
        let id = |k: &str| get(k).and_then(Value::as_u64).map(|v| v as u32);
        let mut eos: Vec<u32> = id("tokenizer.ggml.eos_token_id").into_iter().collect();
        for s in ["<|im_end|>", "<|endoftext|>"] {
            if let Some(i) = inner.token_to_id(s) {
                if !eos.contains(&i) {
                    eos.push(i);
                }
            }
        }
        let template = get("tokenizer.chat_template")
            .and_then(Value::as_str)
            .unwrap_or("");
        let default_system = template
            .split("<|im_start|>system\\n")
            .nth(1)
            .or_else(|| template.split("<|im_start|>system\n").nth(1))
            .and_then(|rest| rest.split("<|im_end|>").next())
            .filter(|s| !s.contains("{{") && !s.contains("{%"))
            .map(String::from);
        let arch = get("general.architecture")
            .and_then(Value::as_str)
            .unwrap_or("");
        Ok(Tokenizer {
            inner,
            eos,
            bos: id("tokenizer.ggml.bos_token_id"),
            add_bos: get("tokenizer.ggml.add_bos_token") == Some(&Value::Bool(true)),
            chat: ChatTemplate {
                default_system,
                qwen3_no_think: qwen3_chat(arch),
            },
        })
    }

    /// What a bundle stores besides `tokenizer.json`.
    pub fn meta(&self) -> crate::format::bundle::TokenizerMeta {
        crate::format::bundle::TokenizerMeta {
            eos_token_ids: self.eos.clone(),
            bos_token_id: self.bos,
            add_bos: self.add_bos,
            default_system: self.chat.default_system.clone(),
            qwen3_no_think: self.chat.qwen3_no_think,
        }
    }

    /// `tokenizer.json` of this tokenizer (for GGUF sources: rebuilt from the metadata).
    pub fn to_json(&self) -> Result<String> {
        self.inner
            .to_string(false)
            .map_err(|e| tok_err("tokenizer.json", e))
    }

    /// From a bundle's `tokenizer.json` and its [`meta`](Self::meta).
    pub fn from_bundle(
        source: &str,
        json: &[u8],
        meta: &crate::format::bundle::TokenizerMeta,
    ) -> Result<Tokenizer> {
        let inner = tokenizers::Tokenizer::from_bytes(json).map_err(|e| tok_err(source, e))?;
        Ok(Tokenizer {
            inner,
            eos: meta.eos_token_ids.clone(),
            bos: meta.bos_token_id,
            add_bos: meta.add_bos,
            chat: ChatTemplate {
                default_system: meta.default_system.clone(),
                qwen3_no_think: meta.qwen3_no_think,
            },
        })
    }

    /// Token ids of `text`; special tokens written in the text (`<|im_start|>`) are recognised.
    /// A BOS is prepended only when the model asks for it.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| tok_err("tokenizer", e))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if self.add_bos {
            if let Some(b) = self.bos {
                ids.push(b);
            }
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Text of `ids`, special tokens skipped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| tok_err("tokenizer", e))
    }

    /// Whether `id` ends a sequence.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.contains(&id)
    }

    /// End-of-sequence ids.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Every token's raw bytes, by id, and whether it is an added (special or control) token:
    /// what a grammar engine needs to know which text each token would write. Byte-level BPE
    /// vocabularies only (GPT-2 / Qwen / SmolLM2 / Llama 3); ids without a token get no bytes.
    pub fn token_bytes(&self) -> Result<Vec<(Vec<u8>, bool)>> {
        let unicode_to_byte = gpt2_unicode_to_byte();
        let added = self.inner.get_added_tokens_decoder();
        let n = self.vocab_size();
        let mut out = Vec::with_capacity(n);
        for id in 0..n as u32 {
            if let Some(a) = added.get(&id) {
                out.push((a.content.as_bytes().to_vec(), true));
                continue;
            }
            let Some(t) = self.inner.id_to_token(id) else {
                out.push((Vec::new(), false));
                continue;
            };
            let bytes = t
                .chars()
                .map(|c| unicode_to_byte.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| {
                    tok_err(
                        "tokenizer",
                        format!(
                            "token {id} {t:?} is not byte-level BPE; constrained decoding needs a \
                             byte-level vocabulary"
                        ),
                    )
                })?;
            out.push((bytes, false));
        }
        Ok(out)
    }
}

/// GPT-2's `bytes_to_unicode` table, inverted: the character byte-level BPE writes for a byte.
fn gpt2_unicode_to_byte() -> std::collections::HashMap<char, u8> {
    let mut m = std::collections::HashMap::new();
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let c = if printable {
            b as char
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or(' ')
        };
        m.insert(c, b);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_qwen3_non_thinking() {
        let t = ChatTemplate {
            default_system: None,
            qwen3_no_think: true,
        };
        let s = t.render(&[
            (Role::User, "hi".into()),
            (Role::Assistant, "<think>hmm</think>\n\nhello".into()),
            (Role::User, "who?".into()),
        ]);
        assert_eq!(
            s,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nwho?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        let t = ChatTemplate {
            default_system: Some("Be brief.".into()),
            qwen3_no_think: false,
        };
        assert!(t
            .render(&[(Role::User, "x".into())])
            .starts_with("<|im_start|>system\nBe brief.<|im_end|>\n"));
    }
}
