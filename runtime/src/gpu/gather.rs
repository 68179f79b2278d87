//! Gathered arguments on the GPU: the assembly of argument rows from sources and blocks,
//! and the scatter of gradients (per element, or a segmented sum per block row in the
//! index's fixed order), one thread per word.

use super::Gpu;
use super::pipelines::{EntryPoint, PrecisionModule};
use crate::buffer::RawBuffer;
use crate::error::Error;
use crate::gather::{Chunks, Field, ScatterPass};
use crate::spec::Precision;
use std::sync::Arc;

/// `assemble`: word `j` of element `k` of a field into its argument row (the kernels that
/// gather in their own loads need none). The scatters sum the gradient words of one or two
/// fields (`count`, offsets `off0` and `off1` in the gradient rows) per entry, field after
/// field, and write the sum (or add it, `flag` nonzero): `scatter_each` into entry `k` of a
/// sink of one entry per element, `scatter_rows` into row `r` of a sink of block rows, over
/// the elements that read row `r`, in the index's order. `flag` in `assemble`: gathered.
///
/// Written over `T`, f32; [`GATHER`] makes the f64 module from it.
const GATHER_WGSL: &str = "// gradfuse gathered arguments: assembly and scatter, one thread per word.

alias T = f32;

struct Params {
    n: u32,
    words: u32,
    stride: u32,
    offset: u32,
    flag: u32,
    count: u32,
    off1: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<T>;
@group(0) @binding(2) var<storage, read> index: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<T>;
@group(0) @binding(4) var<storage, read> order0: array<u32>;
@group(0) @binding(5) var<storage, read> starts0: array<u32>;
@group(0) @binding(6) var<storage, read> order1: array<u32>;
@group(0) @binding(7) var<storage, read> starts1: array<u32>;

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
    var g = src[k * params.stride + params.offset + j];
    if (params.count > 1u) {
        g += src[k * params.stride + params.off1 + j];
    }
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
    var s = T(0);
    for (var e = starts0[r]; e < starts0[r + 1u]; e++) {
        s += src[order0[e] * params.stride + params.offset + j];
    }
    if (params.count > 1u) {
        for (var e = starts1[r]; e < starts1[r + 1u]; e++) {
            s += src[order1[e] * params.stride + params.off1 + j];
        }
    }
    dst[i] = select(s, dst[i] + s, params.flag != 0u);
}

// The first of two passes over rows read by many elements: chunk c (of n) of one field
// (order0, chunk bounds starts0) summed into dst at off1 + c * words.
@compute @workgroup_size(256)
fn scatter_chunks(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread(gid, groups);
    if (i >= params.n * params.words) {
        return;
    }
    let c = i / params.words;
    let j = i % params.words;
    var s = T(0);
    for (var e = starts0[c]; e < starts0[c + 1u]; e++) {
        s += src[order0[e] * params.stride + params.offset + j];
    }
    dst[params.off1 + i] = s;
}

// The second: row r's chunks' partial sums (src), field 0's (row bounds starts0), then
// field 1's (starts1, from off1).
@compute @workgroup_size(256)
fn scatter_partials(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread(gid, groups);
    if (i >= params.n * params.words) {
        return;
    }
    let r = i / params.words;
    let j = i % params.words;
    var s = T(0);
    for (var c = starts0[r]; c < starts0[r + 1u]; c++) {
        s += src[c * params.words + j];
    }
    if (params.count > 1u) {
        for (var c = starts1[r]; c < starts1[r + 1u]; c++) {
            s += src[params.off1 + c * params.words + j];
        }
    }
    dst[i] = select(s, dst[i] + s, params.flag != 0u);
}";

/// [`GATHER_WGSL`] in either precision: in the f64 module every count, stride and offset
/// is of f64 scalars (see [`scalar_params`]).
static GATHER: PrecisionModule =
    PrecisionModule::new(["gradfuse gather", "gradfuse gather f64"], GATHER_WGSL);

/// A pass's parameters in `precision`'s scalars: the words of an f64 come in pairs, so the
/// words per row, the stride and both offsets (`params[1, 2, 3, 6]`) halve.
fn scalar_params(mut params: [usize; 7], precision: Precision) -> [usize; 7] {
    if precision == Precision::F64 {
        for k in [1, 2, 3, 6] {
            params[k] /= 2;
        }
    }
    params
}

impl Gpu {
    /// Records the copy of `f`'s words, for `n` elements, into `args` (`in_words` per row).
    pub(crate) fn record_assemble(
        &self,
        work: &mut super::GpuWork,
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
            0,
            0,
        ];
        // A copy of 4-byte words, whatever they hold.
        self.record_gather_pass(
            work,
            ("assemble", Precision::F32),
            params,
            &[(1, &f.source), (2, index), (3, args)],
        )
    }

    /// Records a scatter pass from `grads` (`grad_words` per element, `n` elements);
    /// `partials` (of [`ScatterPass::partial_words`]) where its indices have chunks.
    pub(crate) fn record_scatter(
        &self,
        work: &mut super::GpuWork,
        pass: &ScatterPass,
        n: usize,
        grad_words: usize,
        grads: &Arc<RawBuffer>,
        partials: Option<&Arc<RawBuffer>>,
    ) -> Result<(), Error> {
        if let (Some(chunks), Some(partials)) = (pass.chunks(), partials) {
            return self.record_chunked_scatter(work, pass, &chunks, grad_words, grads, partials);
        }
        let fields = &pass.fields;
        let (first, last) = (&fields[0], &fields[fields.len() - 1]);
        let offset = |f: &Field| f.grad_offset.unwrap_or(0) as usize;
        let mut params = [
            n,
            first.words as usize,
            grad_words,
            offset(first),
            usize::from(pass.accumulate),
            fields.len(),
            offset(last),
        ];
        let sink = pass.sink();
        let p = pass.precision;
        match (&first.index, &last.index) {
            (Some(i0), Some(i1)) => {
                params[0] = i0.rows;
                let bindings = [
                    (1, grads),
                    (3, sink),
                    (4, &i0.order),
                    (5, &i0.starts),
                    (6, &i1.order),
                    (7, &i1.starts),
                ];
                self.record_gather_pass(work, ("scatter_rows", p), params, &bindings)
            }
            _ => {
                self.record_gather_pass(work, ("scatter_each", p), params, &[(1, grads), (3, sink)])
            }
        }
    }

    /// Records a scatter pass in two: each field's chunks into `partials`, then each row's.
    fn record_chunked_scatter(
        &self,
        work: &mut super::GpuWork,
        pass: &ScatterPass,
        chunks: &[&Chunks],
        grad_words: usize,
        grads: &Arc<RawBuffer>,
        partials: &Arc<RawBuffer>,
    ) -> Result<(), Error> {
        let words = pass.fields[0].words as usize;
        let mut first = 0;
        for (f, c) in pass.fields.iter().zip(chunks) {
            let Some(index) = &f.index else {
                return Err(Error::Unsupported(
                    "a chunked scatter of a field without an index".into(),
                ));
            };
            let offset = f.grad_offset.unwrap_or(0) as usize;
            let params = [c.count, words, grad_words, offset, 0, 1, first * words];
            let bindings = [(1, grads), (3, partials), (4, &index.order), (5, &c.starts)];
            let entry = ("scatter_chunks", pass.precision);
            self.record_gather_pass(work, entry, params, &bindings)?;
            first += c.count;
        }
        let last = chunks[chunks.len() - 1];
        let params = [
            pass.fields[0].index.as_ref().map_or(0, |i| i.rows),
            words,
            0,
            0,
            usize::from(pass.accumulate),
            pass.fields.len(),
            chunks[0].count * words,
        ];
        let bindings = [
            (1, partials),
            (3, pass.sink()),
            (5, &chunks[0].row_chunks),
            (7, &last.row_chunks),
        ];
        let entry = ("scatter_partials", pass.precision);
        self.record_gather_pass(work, entry, params, &bindings)
    }

    /// One dispatch of `entry` of the module over `precision` over `params[0] * params[1]`
    /// scalars (binding 3 written); `params` in 4-byte words.
    fn record_gather_pass(
        &self,
        work: &mut super::GpuWork,
        (entry, precision): (&'static str, Precision),
        params: [usize; 7],
        bindings: &[(u32, &Arc<RawBuffer>)],
    ) -> Result<(), Error> {
        let params = scalar_params(params, precision);
        let threads = (params[0] as u64) * (params[1] as u64);
        if threads == 0 {
            return Ok(());
        }
        let mut words: Vec<u32> = params.iter().map(|&p| p as u32).collect();
        words.resize(8, 0);
        let storage: Vec<_> = bindings
            .iter()
            .map(|&(binding, b)| (binding, b.gpu(), binding != 3))
            .collect();
        let (module, wgsl) = GATHER.get(precision);
        let at = EntryPoint {
            module,
            wgsl,
            entry,
            pass: entry,
        };
        let workgroups = self.workgroups(threads.div_ceil(256));
        self.record_entry(work, &at, &words, &storage, workgroups)
    }
}
