//! Attention for CPU rasterisers, each lane's query rows and accumulators in named registers:
//! decode (`attention_lanes.wgsl`: one lane per query head and key range) and prefill
//! (`attention_rows.wgsl`: one lane per query token and group of query heads, walking the
//! keys in order).
//!
//! The kernels' sources are templates: a rasteriser keeps a private array that a loop indexes
//! in memory (a scalar load and store per lane and element), so a row's `head_dim / 4` vec4s
//! are written out as variables. [`shader`] and [`prefill_shader`] expand a template once per
//! (cache format, head_dim, rows a lane) a process meets (`super::expanded` keeps it).

use crate::backend::KvFormat;
use crate::gpu::context::Shader;

const TEMPLATE: &str = include_str!("attention_lanes.wgsl");
const PREFILL_TEMPLATE: &str = include_str!("attention_rows.wgsl");
const PARAMS: &str = include_str!("attention_params.wgsl");
const WORDS: &str = include_str!("attention_words.wgsl");

/// The largest head_dim the kernels are expanded for (64 vec4 registers a row).
pub const MAX_HEAD_DIM: usize = 256;

/// The most vec4s of query rows one prefill lane keeps (and as many of accumulators): a
/// KV head's whole group of query heads where their rows fit, so that each key and value
/// loaded serves them all.
const PREFILL_MAX_VEC4S: usize = 64;

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

/// The decode kernel's WGSL for a cache in `format` and rows of `d4` vec4s: the template's
/// marked lines written once per vec4 (`//@ i`) or per load (`//@ w`) of a row, after the
/// uniform parameters' prelude.
pub fn source(format: KvFormat, d4: usize) -> String {
    expand(TEMPLATE, format, d4, 1)
}

/// The prefill kernel's WGSL for a cache in `format`, rows of `d4` vec4s and `rg` query rows
/// a lane: as [`source`], and the lines marked `//@ r` once per row, `//@ r i` once per row
/// and vec4.
pub fn prefill_source(format: KvFormat, d4: usize, rg: usize) -> String {
    expand(PREFILL_TEMPLATE, format, d4, rg)
}

fn expand(template: &str, format: KvFormat, d4: usize, rg: usize) -> String {
    let wd = words(format, d4);
    let n_words = d4 / wd.per;
    let per_vec4 = |body: &str, r: usize, i: usize| {
        let (w, h) = (i / wd.per, i % wd.per);
        body.trim_end()
            .replace("{r}", &r.to_string())
            .replace("{i}", &i.to_string())
            .replace("{w}", &w.to_string())
            .replace("{h}", &h.to_string())
            + "\n"
    };
    let mut out = String::with_capacity(PARAMS.len() + WORDS.len() + template.len() * 2 * rg);
    out.push_str(PARAMS);
    out.push('\n');
    for line in WORDS.lines().chain(template.lines()) {
        if let Some(body) = line.strip_suffix("//@ r i") {
            for r in 0..rg {
                (0..d4).for_each(|i| out.push_str(&per_vec4(body, r, i)));
            }
        } else if let Some(body) = line.strip_suffix("//@ i") {
            (0..d4).for_each(|i| out.push_str(&per_vec4(body, 0, i)));
        } else if let Some(body) = line.strip_suffix("//@ r") {
            for r in 0..rg {
                out.push_str(&body.trim_end().replace("{r}", &r.to_string()));
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
                    .replace("{RG}", &rg.to_string())
                    .replace("{WORD}", wd.ty)
                    .replace("{X4}", wd.x4),
            );
            out.push('\n');
        }
    }
    out
}

/// The label of an expansion: its template, cache format and vec4s a row.
fn label(template: &str, format: KvFormat, d4: usize) -> String {
    let f16 = if format == KvFormat::F16 { "/f16" } else { "" };
    format!("{template}{f16}/d{d4}")
}

/// The decode kernel for a cache in `format` and `head_dim` (a multiple of 4 up to
/// [`MAX_HEAD_DIM`], checked by the caller).
pub fn shader(format: KvFormat, head_dim: usize) -> &'static Shader {
    let d4 = head_dim / 4;
    super::expanded(label("attention_lanes", format, d4), || source(format, d4))
}

/// Query heads one prefill lane takes for groups of `g` query heads per KV head and rows of
/// `head_dim` (a multiple of 4 up to [`MAX_HEAD_DIM`]): the largest divisor of `g` whose rows
/// fit in [`PREFILL_MAX_VEC4S`].
pub fn prefill_heads(g: usize, head_dim: usize) -> usize {
    let d4 = (head_dim / 4).max(1);
    (1..=g.max(1))
        .rev()
        .find(|&rg| g.is_multiple_of(rg) && rg * d4 <= PREFILL_MAX_VEC4S)
        .unwrap_or(1)
}

/// The prefill kernel for a cache in `format`, `head_dim` (a multiple of 4 up to
/// [`MAX_HEAD_DIM`], checked by the caller) and `rg` query heads a lane ([`prefill_heads`]).
pub fn prefill_shader(format: KvFormat, head_dim: usize, rg: usize) -> &'static Shader {
    let d4 = head_dim / 4;
    let name = label("attention_rows", format, d4) + &format!("/r{rg}");
    super::expanded(name, || prefill_source(format, d4, rg))
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
    fn the_prefill_template_expands_every_row_of_a_lane() {
        for format in [KvFormat::F32, KvFormat::F16] {
            for (d4, rg) in [(1, 1), (3, 2), (16, 3), (17, 1), (32, 2)] {
                let src = prefill_source(format, d4, rg);
                let code: String = src
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect();
                for marker in [
                    "{r}", "{i}", "{w}", "{h}", "{D4}", "{W}", "{RG}", "{WORD}", "//@",
                ] {
                    assert!(
                        !code.contains(marker),
                        "{format:?} d4={d4} rg={rg}: {marker} left"
                    );
                }
                let (r, i) = (rg - 1, d4 - 1);
                assert!(src.contains(&format!("var a{r}_{i} = vec4<f32>(0.0);")));
                assert!(!src.contains(&format!("var a{rg}_0 ")));
                assert!(!src.contains(&format!("var a0_{d4} ")));
                assert_eq!(
                    src.matches("var m").count(),
                    rg,
                    "{format:?} d4={d4} rg={rg}"
                );
                assert!(src.contains(&format!("const RG: u32 = {rg}u;")));
            }
        }
    }

    #[test]
    fn a_prefill_lane_takes_the_largest_group_that_fits() {
        // SmolLM2 (3 query heads a KV head, head_dim 64), Qwen3 (4, 128), an encoder (1, 32).
        assert_eq!(prefill_heads(3, 64), 3);
        assert_eq!(prefill_heads(4, 128), 2);
        assert_eq!(prefill_heads(1, 32), 1);
        assert_eq!(prefill_heads(8, 256), 1);
        assert_eq!(prefill_heads(6, 44), 3);
        assert_eq!(prefill_heads(7, 40), 1);
    }

    #[test]
    fn each_expansion_is_kept_once() {
        let a = shader(KvFormat::F16, 64);
        let b = shader(KvFormat::F16, 64);
        assert!(std::ptr::eq(a, b));
        assert_ne!(a.label, shader(KvFormat::F32, 64).label);
        assert_ne!(a.label, shader(KvFormat::F16, 68).label);
        let p = prefill_shader(KvFormat::F16, 64, 3);
        assert!(std::ptr::eq(p, prefill_shader(KvFormat::F16, 64, 3)));
        assert_ne!(p.label, a.label);
        assert_ne!(p.label, prefill_shader(KvFormat::F16, 64, 1).label);
    }
}
