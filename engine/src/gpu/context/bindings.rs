//! Kernel bindings: the layouts each kernel's WGSL declares, and bind groups built once per
//! (kernel, buffers) with the uniform ring at a dynamic offset.

use std::sync::Arc;

use super::{lock, GpuContext, Shader};
use crate::error::{EngineError, Result};

/// Bind groups kept for reuse; the cache is emptied past this. Each keeps its buffers alive, so
/// the bound matters where callers make fresh buffers per call (an embedder's batches): it holds
/// a few calls' worth. A decode step of a 36-layer model uses about 650.
const BIND_CACHE: usize = 1024;
/// A kernel's bind group layout (binding 0: the uniform parameters at a dynamic offset;
/// 1..: storage buffers, read-only where the WGSL says `read`) and its pipeline layout.
pub(super) struct Layout {
    pub(super) bind: wgpu::BindGroupLayout,
    pub(super) pipeline: wgpu::PipelineLayout,
}

/// A bind group's identity: the kernel, its parameter block's size and its buffers.
#[derive(PartialEq, Eq, Hash)]
pub(super) struct BindKey {
    label: &'static str,
    params: u64,
    buffers: Vec<wgpu::Buffer>,
}

impl GpuContext {
    /// The kernel's layouts, from the bindings its WGSL declares.
    pub(super) fn layout(&self, shader: &Shader) -> Result<Arc<Layout>> {
        if let Some(l) = lock(&self.layouts).get(shader.label) {
            return Ok(l.clone());
        }
        let entries = binding_entries(shader)?;
        let bind = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(shader.label),
                entries: &entries,
            });
        let pipeline = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(shader.label),
                bind_group_layouts: &[Some(&bind)],
                immediate_size: 0,
            });
        let l = Arc::new(Layout { bind, pipeline });
        lock(&self.layouts).insert(shader.label, l.clone());
        Ok(l)
    }

    /// The bind group of `buffers` for a kernel, built on first use: the uniform ring at a
    /// dynamic offset, then the buffers in order.
    pub(super) fn bind_group(
        &self,
        label: &'static str,
        layout: &Layout,
        params: u64,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let key = BindKey {
            label,
            params,
            buffers: buffers.iter().map(|&b| b.clone()).collect(),
        };
        let mut binds = lock(&self.binds);
        if let Some(b) = binds.get(&key) {
            return b.clone();
        }
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.ring,
                offset: 0,
                size: wgpu::BufferSize::new(params),
            }),
        }];
        for (i, b) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            });
        }
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &layout.bind,
            entries: &entries,
        });
        if binds.len() >= BIND_CACHE {
            binds.clear();
        }
        binds.insert(key, bind.clone());
        bind
    }
}

/// The bind group layout entries a kernel's WGSL declares (`@group(0) @binding(N) var<…>`):
/// binding 0 its uniform parameters at a dynamic offset, the rest storage buffers, read-only
/// where declared `read`. Bindings must be numbered 0, 1, … without gaps.
fn binding_entries(shader: &Shader) -> Result<Vec<wgpu::BindGroupLayoutEntry>> {
    let bad = |detail: String| EngineError::Shape {
        op: shader.label,
        detail,
    };
    let mut entries = Vec::new();
    let mut rest = shader.source;
    while let Some(at) = rest.find("@binding(") {
        rest = &rest[at + "@binding(".len()..];
        let close = rest
            .find(')')
            .ok_or_else(|| bad("unclosed @binding(".into()))?;
        let binding: u32 = rest[..close]
            .trim()
            .parse()
            .map_err(|_| bad(format!("binding number {:?}", &rest[..close])))?;
        let var = rest
            .find("var<")
            .ok_or_else(|| bad(format!("binding {binding} has no var<…>")))?;
        let decl = &rest[var + 4..];
        let end = decl
            .find('>')
            .ok_or_else(|| bad(format!("binding {binding}: unclosed var<")))?;
        let space: String = decl[..end].chars().filter(|c| !c.is_whitespace()).collect();
        let ty = match space.as_str() {
            "uniform" => wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: None,
            },
            "storage,read" | "storage" => wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: true },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            "storage,read_write" => wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            other => {
                return Err(bad(format!(
                    "binding {binding}: address space var<{other}>"
                )))
            }
        };
        entries.push(wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty,
            count: None,
        });
    }
    entries.sort_by_key(|e| e.binding);
    let numbered = entries
        .iter()
        .enumerate()
        .all(|(i, e)| e.binding == i as u32);
    let uniform0 = entries.first().is_some_and(|e| {
        matches!(
            e.ty,
            wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                ..
            }
        )
    });
    if !numbered || !uniform0 {
        return Err(bad(
            "bindings must be 0 (the uniform parameters), 1, 2, … without gaps".into(),
        ));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_are_read_from_the_wgsl() {
        let entries = binding_entries(&crate::gpu::kernels::attention::SPLIT).expect("split");
        let kinds: Vec<_> = entries
            .iter()
            .map(|e| match e.ty {
                wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    ..
                } => "uniform",
                wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: true },
                    ..
                } => "read",
                wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: false },
                    ..
                } => "read_write",
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "uniform",
                "read",
                "read",
                "read",
                "read_write",
                "read_write"
            ]
        );
        let gap = Shader {
            label: "gappy",
            source: "@group(0) @binding(0) var<uniform> p: u32;\n\
                     @group(0) @binding(2) var<storage, read> x: array<f32>;",
            entry: "main",
        };
        let e = binding_entries(&gap).unwrap_err().to_string();
        assert!(e.contains("gappy") && e.contains("without gaps"), "{e}");
    }
}
