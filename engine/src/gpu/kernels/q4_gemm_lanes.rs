//! Prefill's block-quantized GEMM for CPU rasterisers (`q4_gemm_lanes.wgsl`): a lane takes R
//! weight rows and T tokens, walking the 32-weight groups with everything in registers.
//!
//! The kernel's source is a template (a rasteriser keeps a private array that a loop indexes
//! in memory): [`shader`] writes its marked lines once per row (`//@ r`), token (`//@ t`) or
//! both (`//@ r t`), once per (rows, tokens) a process meets (`super::expanded` keeps it).

use crate::gpu::context::Shader;

const COMMON: &str = include_str!("gemv_common.wgsl");
const TEMPLATE: &str = include_str!("q4_gemm_lanes.wgsl");

/// The kernel's WGSL for `r` rows and `t` tokens a lane, after the GEMVs' prelude.
pub fn source(r: usize, t: usize) -> String {
    let mut out = String::with_capacity(COMMON.len() + TEMPLATE.len() + 64 * r * t);
    out.push_str(COMMON);
    out.push('\n');
    let each = |out: &mut String, body: &str, ri: usize, ti: usize| {
        let line = body.trim_end();
        out.push_str(
            &line
                .replace("{r}", &ri.to_string())
                .replace("{t}", &ti.to_string()),
        );
        out.push('\n');
    };
    for line in TEMPLATE.lines() {
        if let Some(body) = line.strip_suffix("//@ r t") {
            for ri in 0..r {
                (0..t).for_each(|ti| each(&mut out, body, ri, ti));
            }
        } else if let Some(body) = line.strip_suffix("//@ r") {
            (0..r).for_each(|ri| each(&mut out, body, ri, 0));
        } else if let Some(body) = line.strip_suffix("//@ t") {
            (0..t).for_each(|ti| each(&mut out, body, 0, ti));
        } else {
            out.push_str(
                &line
                    .replace("{R}", &r.to_string())
                    .replace("{T}", &t.to_string()),
            );
            out.push('\n');
        }
    }
    out
}

/// The kernel for `r` rows and `t` tokens a lane, expanded on first use.
pub fn shader(r: usize, t: usize) -> &'static Shader {
    super::expanded(format!("q4_gemm_lanes/r{r}t{t}"), || source(r, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_expands_every_row_and_token() {
        for (r, t) in [(1, 1), (8, 1), (1, 4), (8, 4), (3, 2)] {
            let src = source(r, t);
            let code: String = src
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            for marker in ["{r}", "{t}", "{R}", "{T}", "//@"] {
                assert!(!code.contains(marker), "r={r} t={t}: {marker} left");
            }
            assert_eq!(src.matches("= group_codes(").count(), r, "r={r} t={t}");
            assert_eq!(src.matches("= acts(").count(), t, "r={r} t={t}");
            assert_eq!(src.matches("+= apply(").count(), r * t, "r={r} t={t}");
            assert_eq!(src.matches("    finish(row0").count(), r * t, "r={r} t={t}");
        }
    }

    #[test]
    fn each_expansion_is_kept_once() {
        let a = shader(8, 4);
        assert!(std::ptr::eq(a, shader(8, 4)));
        assert_ne!(a.label, shader(4, 8).label);
    }
}
