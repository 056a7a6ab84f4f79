//! Decode attention for CPU rasterisers (`attention_lanes.wgsl`): one lane per (query head,
//! key range), each lane's query row and accumulators in named registers.
//!
//! The kernel's source is a template: a rasteriser keeps a private array that a loop indexes
//! in memory (a scalar load and store per lane and element), so the row's `head_dim / 4`
//! vec4s are written out as variables. [`shader`] expands the template once per (cache
//! format, head_dim) a process meets and keeps it for the process's life, as the pipeline
//! cache keeps its pipelines.

use std::sync::Mutex;

use crate::backend::KvFormat;
use crate::gpu::context::Shader;

const TEMPLATE: &str = include_str!("attention_lanes.wgsl");
const PARAMS: &str = include_str!("attention_params.wgsl");

/// The largest head_dim the kernel is expanded for (64 vec4 registers a row).
pub const MAX_HEAD_DIM: usize = 256;

/// How a cache row is read: the WGSL type of one load, vec4s of values per load, and the
/// body of `x4(word, h)`.
struct Words {
    ty: &'static str,
    per: usize,
    x4: &'static str,
}

fn words(format: KvFormat, d4: usize) -> Words {
    match format {
        KvFormat::F32 => Words {
            ty: "vec4<f32>",
            per: 1,
            x4: "return word;",
        },
        // 16-byte loads of eight halves where a row has an even number of vec4s.
        KvFormat::F16 if d4.is_multiple_of(2) => Words {
            ty: "vec4<u32>",
            per: 2,
            x4: "let lo = select(word.x, word.z, h == 1u);\n    \
                 let hi = select(word.y, word.w, h == 1u);\n    \
                 return vec4<f32>(unpack2x16float(lo), unpack2x16float(hi));",
        },
        KvFormat::F16 => Words {
            ty: "vec2<u32>",
            per: 1,
            x4: "return vec4<f32>(unpack2x16float(word.x), unpack2x16float(word.y));",
        },
    }
}

/// The kernel's WGSL for a cache in `format` and rows of `d4` vec4s: the template's marked
/// lines written once per vec4 (`//@ i`) or per load (`//@ w`) of a row, after the uniform
/// parameters' prelude.
pub fn source(format: KvFormat, d4: usize) -> String {
    let wd = words(format, d4);
    let n_words = d4 / wd.per;
    let mut out = String::with_capacity(PARAMS.len() + TEMPLATE.len() * 2);
    out.push_str(PARAMS);
    out.push('\n');
    for line in TEMPLATE.lines() {
        if let Some(body) = line.strip_suffix("//@ i") {
            for i in 0..d4 {
                let (w, h) = (i / wd.per, i % wd.per);
                out.push_str(
                    &body
                        .trim_end()
                        .replace("{i}", &i.to_string())
                        .replace("{w}", &w.to_string())
                        .replace("{h}", &h.to_string()),
                );
                out.push('\n');
            }
        } else if let Some(body) = line.strip_suffix("//@ w") {
            for w in 0..n_words {
                out.push_str(&body.trim_end().replace("{w}", &w.to_string()));
                out.push('\n');
            }
        } else {
            out.push_str(
                &line
                    .replace("{D4}", &d4.to_string())
                    .replace("{W}", &n_words.to_string())
                    .replace("{WORD}", wd.ty)
                    .replace("{X4}", wd.x4),
            );
            out.push('\n');
        }
    }
    out
}

/// Expanded kernels by (format, vec4s a row).
static EXPANDED: Mutex<Vec<((KvFormat, usize), &'static Shader)>> = Mutex::new(Vec::new());

/// The kernel for a cache in `format` and `head_dim` (a multiple of 4 up to
/// [`MAX_HEAD_DIM`], checked by the caller), expanded on first use. Each expansion (a few KB)
/// lives as long as the process: a process meets one or two head sizes.
pub fn shader(format: KvFormat, head_dim: usize) -> &'static Shader {
    let d4 = head_dim / 4;
    let mut expanded = EXPANDED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = expanded.iter().find(|(k, _)| *k == (format, d4)) {
        return s;
    }
    let label = match format {
        KvFormat::F32 => format!("attention_lanes/d{d4}"),
        KvFormat::F16 => format!("attention_lanes/f16/d{d4}"),
    };
    let shader: &'static Shader = Box::leak(Box::new(Shader {
        label: Box::leak(label.into_boxed_str()),
        source: Box::leak(source(format, d4).into_boxed_str()),
        entry: "main",
    }));
    expanded.push(((format, d4), shader));
    shader
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_expands_to_every_row_width() {
        for format in [KvFormat::F32, KvFormat::F16] {
            for d4 in [1, 2, 3, 16, 17, 64] {
                let src = source(format, d4);
                let code: String = src
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect();
                for marker in ["{i}", "{w}", "{h}", "{D4}", "{W}", "{WORD}", "{X4}", "//@"] {
                    assert!(!code.contains(marker), "{format:?} d4={d4}: {marker} left");
                }
                let last = d4 - 1;
                assert!(src.contains(&format!("var a{last} = vec4<f32>(0.0);")));
                assert!(!src.contains(&format!("var a{d4} ")));
                let loads = src.matches("= kc[row + ").count();
                let per = if format == KvFormat::F16 && d4 % 2 == 0 {
                    2
                } else {
                    1
                };
                assert_eq!(loads, d4 / per, "{format:?} d4={d4}: key loads");
            }
        }
    }

    #[test]
    fn each_expansion_is_kept_once() {
        let a = shader(KvFormat::F16, 64);
        let b = shader(KvFormat::F16, 64);
        assert!(std::ptr::eq(a, b));
        assert_ne!(a.label, shader(KvFormat::F32, 64).label);
        assert_ne!(a.label, shader(KvFormat::F16, 68).label);
    }
}
