//! Bind groups kept for the next identical dispatch. A training loop or a solver records
//! the same launches every step; making a uniform buffer and a bind group for each
//! dispatch is most of a small launch's host time (about 25 µs per launch on the H100
//! machine, more than the GPU needs for 2^20 elements). A dispatch binding the same
//! buffers at the same offsets, with the same uniform words, reuses the bind group (and its
//! uniform) made the first time.
//!
//! A cached bind group holds its buffers: a device buffer takes the bind groups that name
//! it along when it is dropped ([`OwnedBuffer`]), so a user's memory is freed as before.

use super::{Gpu, PipelineKey, lock};
use crate::fast_hash::{FastHasher, FastMap};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, Weak};

/// Most bind groups kept; past it the cache starts again (a program cycles through few).
const MAX_CACHED: usize = 512;

/// One storage binding of a dispatch: binding, buffer, offset, size (None: the whole).
pub(crate) type StorageBinding<'a> = (u32, &'a wgpu::Buffer, u64, Option<NonZeroU64>);

/// What a cached bind group binds.
struct BindKey {
    pipeline: PipelineKey,
    uniform: (u32, Vec<u32>),
    buffers: Vec<(u32, wgpu::Buffer, u64, Option<NonZeroU64>)>,
}

impl BindKey {
    /// Whether it binds what a dispatch asks for.
    fn binds(
        &self,
        pipeline: PipelineKey,
        uniform: (u32, &[u32]),
        buffers: &[StorageBinding<'_>],
    ) -> bool {
        self.pipeline == pipeline
            && self.uniform.0 == uniform.0
            && self.uniform.1 == uniform.1
            && self.buffers.len() == buffers.len()
            && self
                .buffers
                .iter()
                .zip(buffers)
                .all(|(k, b)| k.0 == b.0 && &k.1 == b.1 && k.2 == b.2 && k.3 == b.3)
    }
}

/// The hash of a dispatch's bindings, computed from the borrowed bindings: a dispatch that
/// finds its bind group allocates nothing (building an owned key per lookup was a tenth of
/// a recorded step's host time).
fn bindings_hash(
    pipeline: PipelineKey,
    uniform: (u32, &[u32]),
    buffers: &[StorageBinding<'_>],
) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = std::hash::BuildHasherDefault::<FastHasher>::default().build_hasher();
    (pipeline, uniform).hash(&mut h);
    for b in buffers {
        b.hash(&mut h);
    }
    h.finish()
}

/// The bind groups of a device's recorded dispatches, by the hash of what they bind (a
/// hash's few entries told apart by [`BindKey::binds`]).
#[derive(Default)]
pub(crate) struct BindCache {
    groups: Mutex<FastMap<u64, Vec<(BindKey, wgpu::BindGroup)>>>,
}

impl BindCache {
    /// Drops the bind groups that bind `buffer`.
    fn forget(&self, buffer: &wgpu::Buffer) {
        let mut groups = lock(&self.groups);
        for entries in groups.values_mut() {
            entries.retain(|(k, _)| k.buffers.iter().all(|b| &b.1 != buffer));
        }
        groups.retain(|_, entries| !entries.is_empty());
    }

    /// How many bind groups it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.groups).values().map(Vec::len).sum()
    }
}

/// A device buffer of the user's (or a scratch row's): dropped, it drops the cached bind
/// groups that name it, and so its memory.
pub(crate) struct OwnedBuffer {
    pub(crate) buffer: wgpu::Buffer,
    cache: Weak<BindCache>,
}

impl Drop for OwnedBuffer {
    fn drop(&mut self) {
        if let Some(cache) = self.cache.upgrade() {
            cache.forget(&self.buffer);
        }
    }
}

impl Gpu {
    /// `buffer`, owned so that dropping it drops the bind groups cached for it.
    pub(crate) fn owned(&self, buffer: wgpu::Buffer) -> OwnedBuffer {
        OwnedBuffer {
            buffer,
            cache: Arc::downgrade(&self.bind_cache),
        }
    }

    /// The bind group of a dispatch of the pipeline `key` (layout `layout`): its uniform
    /// holds `uniform.1` at binding `uniform.0`, and `buffers` are its other bindings. Made
    /// once, then reused by every dispatch that binds the same.
    pub(crate) fn cached_bind_group(
        &self,
        key: PipelineKey,
        layout: &wgpu::BindGroupLayout,
        label: &str,
        uniform: (u32, &[u32]),
        buffers: &[StorageBinding<'_>],
    ) -> wgpu::BindGroup {
        let hash = bindings_hash(key, uniform, buffers);
        if let Some(entries) = lock(&self.bind_cache.groups).get(&hash)
            && let Some((_, g)) = entries.iter().find(|(k, _)| k.binds(key, uniform, buffers))
        {
            return g.clone();
        }
        let params = self.uniform(label, uniform.1);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: uniform.0,
            resource: params.as_entire_binding(),
        }];
        for &(binding, buffer, offset, size) in buffers {
            entries.push(wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size,
                }),
            });
        }
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout,
            entries: &entries,
        });
        let bind_key = BindKey {
            pipeline: key,
            uniform: (uniform.0, uniform.1.to_vec()),
            buffers: buffers
                .iter()
                .map(|&(b, buf, offset, size)| (b, buf.clone(), offset, size))
                .collect(),
        };
        let mut groups = lock(&self.bind_cache.groups);
        if groups.len() >= MAX_CACHED {
            groups.clear();
        }
        groups
            .entry(hash)
            .or_default()
            .push((bind_key, group.clone()));
        group
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bind groups cached for a buffer go when it goes; the same bindings get the same
    /// group. Needs an adapter (lavapipe in CI, where no adapter is an error).
    #[test]
    fn a_dropped_buffer_takes_its_bind_groups_along() {
        let gpu = match Gpu::open() {
            Ok(g) => g,
            Err(e) if crate::device::gpu_required() => panic!("no GPU: {e}"),
            Err(_) => return,
        };
        let layout = gpu
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &[0, 1].map(|binding| wgpu::BindGroupLayoutEntry {
                    binding,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: if binding == 0 {
                            wgpu::BufferBindingType::Uniform
                        } else {
                            wgpu::BufferBindingType::Storage { read_only: true }
                        },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                }),
            });
        let buffer = |w: u32| gpu.owned(gpu.resident_buffer(&[w; 4]).expect("a small buffer"));
        let (a, b) = (buffer(1), buffer(2));
        let key = (0, 0, "test", 0);
        let group = |buf: &OwnedBuffer, u: u32| {
            gpu.cached_bind_group(
                key,
                &layout,
                "test",
                (0, &[u, 0, 0, 0]),
                &[(1, &buf.buffer, 0, None)],
            )
        };
        let cached = || gpu.bind_cache.len();
        let first = group(&a, 7);
        assert_eq!(group(&a, 7), first);
        assert_eq!(cached(), 1);
        assert_ne!(group(&a, 8), first);
        let _ = group(&b, 7);
        assert_eq!(cached(), 3);
        drop(a);
        assert_eq!(cached(), 1);
        drop(b);
        assert_eq!(cached(), 0);
    }
}
