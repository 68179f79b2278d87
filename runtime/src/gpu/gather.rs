//! Gathered arguments on the GPU: the assembly of argument rows from sources and blocks,
//! and the scatter of gradients (per element, or a segmented sum per block row in the
//! index's fixed order), one thread per word.

use super::Gpu;
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::gather::Field;
use std::sync::Arc;

/// `assemble`: word `j` of element `k` of a field into its argument row. `scatter_each`: a
/// field's gradient words of element `k` into entry `k` of its sink. `scatter_rows`: word
/// `j` of block row `r` is the sum, in element order, of the gradient words of the elements
/// that read row `r`. `flag`: gathered (assemble), or add to the sink (scatters).
const GATHER_WGSL: &str = "// gradfuse gathered arguments: assembly and scatter, one thread per word.

struct Params {
    n: u32,
    words: u32,
    stride: u32,
    offset: u32,
    flag: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
@group(0) @binding(4) var<storage, read> order: array<u32>;
@group(0) @binding(5) var<storage, read> starts: array<u32>;

fn thread(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

@compute @workgroup_size(256)
fn assemble(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread(gid, groups);
    if (i >= params.n * params.words) {
        return;
    }
    let k = i / params.words;
    let j = i % params.words;
    var row = k;
    if (params.flag != 0u) {
        row = index[k];
    }
    dst[k * params.stride + params.offset + j] = src[row * params.words + j];
}

@compute @workgroup_size(256)
fn scatter_each(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread(gid, groups);
    if (i >= params.n * params.words) {
        return;
    }
    let k = i / params.words;
    let j = i % params.words;
    let g = src[k * params.stride + params.offset + j];
    dst[i] = select(g, dst[i] + g, params.flag != 0u);
}

@compute @workgroup_size(256)
fn scatter_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread(gid, groups);
    if (i >= params.n * params.words) {
        return;
    }
    let r = i / params.words;
    let j = i % params.words;
    var s = 0.0f;
    for (var e = starts[r]; e < starts[r + 1u]; e++) {
        s += src[order[e] * params.stride + params.offset + j];
    }
    dst[i] = select(s, dst[i] + s, params.flag != 0u);
}
";

impl Gpu {
    /// Records the copy of `f`'s words, for `n` elements, into `args` (`in_words` per row).
    pub(crate) fn record_assemble(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        f: &Field,
        n: usize,
        in_words: usize,
        args: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        let index = f.index.as_ref().map_or(&f.source, |i| &i.entries);
        let params = [
            n,
            f.words as usize,
            in_words,
            f.args_offset as usize,
            usize::from(f.index.is_some()),
        ];
        self.record_gather_pass(
            encoder,
            "assemble",
            params,
            &[(1, &f.source), (2, index), (3, args)],
        )
    }

    /// Records the scatter of `f`'s gradient words from `grads` (`grad_words` per element)
    /// into its sink, added to it if `accumulate`.
    pub(crate) fn record_scatter(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        f: &Field,
        n: usize,
        grad_words: usize,
        grads: &Arc<RawBuffer>,
        accumulate: bool,
    ) -> Result<(), Error> {
        let (Some(sink), Some(off)) = (&f.sink, f.grad_offset) else {
            return Ok(());
        };
        let w = f.words as usize;
        let flag = usize::from(accumulate);
        match &f.index {
            None => {
                let params = [n, w, grad_words, off as usize, flag];
                self.record_gather_pass(encoder, "scatter_each", params, &[(1, grads), (3, sink)])
            }
            Some(i) => {
                let params = [i.rows, w, grad_words, off as usize, flag];
                let bindings = [(1, grads), (3, sink), (4, &i.order), (5, &i.starts)];
                self.record_gather_pass(encoder, "scatter_rows", params, &bindings)
            }
        }
    }

    /// One dispatch of `entry` over `params[0] * params[1]` words.
    fn record_gather_pass(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        entry: &'static str,
        params: [usize; 5],
        bindings: &[(u32, &Arc<RawBuffer>)],
    ) -> Result<(), Error> {
        use wgpu::BufferBindingType as B;
        let threads = (params[0] as u64) * (params[1] as u64);
        if threads == 0 {
            return Ok(());
        }
        let layout: Vec<(u32, B)> = std::iter::once((0, B::Uniform))
            .chain(
                bindings
                    .iter()
                    .map(|&(b, _)| (b, B::Storage { read_only: b != 3 })),
            )
            .collect();
        let key = (GATHER_WGSL.as_ptr() as usize, GATHER_WGSL.len(), entry);
        let pipeline = self.compile(key, "gradfuse gather", GATHER_WGSL, entry, &layout)?;
        let mut words: Vec<u32> = params.iter().map(|&p| p as u32).collect();
        words.resize(8, 0);
        let uniform = self.uniform("gradfuse gather", &words);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uniform.as_entire_binding(),
        }];
        for &(binding, b) in bindings {
            entries.push(wgpu::BindGroupEntry {
                binding,
                resource: b.gpu().as_entire_binding(),
            });
        }
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("gradfuse gather"),
            layout: &pipeline.layout,
            entries: &entries,
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(entry),
            timestamp_writes: None,
        });
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &group, &[]);
        let groups = threads.div_ceil(256);
        let y = groups.div_ceil(self.limits.max_compute_workgroups_per_dimension as u64);
        pass.dispatch_workgroups(groups.div_ceil(y) as u32, y as u32, 1);
        Ok(())
    }
}
