//! Gathered arguments: a per-element argument read from a row of a parameter block through
//! an index array, and its gradient scattered back as the gradient of the batch sum in each
//! row, summed in a fixed order (no float atomics: the same bits on every run).
//!
//! An [`Index`] is validated and grouped by row once, on the host: every later launch
//! scatters by a segmented sum over that grouping (row `r` adds the gradients of the
//! elements that read it, in element order). A launch with gathered arguments assembles the
//! kernel's argument rows on the device, runs the kernel, then scatters each argument's
//! gradient words into its sink; gradients that land in the same buffer add up, in the order
//! of the function's arguments.

use crate::buffer::{Buffer, RawBuffer};
use crate::device::Device;
use crate::error::Error;
use crate::spec::{KernelSpec, Precision};
use std::sync::Arc;

/// An index array into the rows of a block (`len` entries, each below `rows`), with its
/// grouping by row for the scatter of gradients. Made by [`Device::index`].
#[derive(Clone)]
pub struct Index {
    pub(crate) entries: Arc<RawBuffer>,
    /// The elements sorted by the row they read (stable: in element order within a row).
    pub(crate) order: Arc<RawBuffer>,
    /// `rows + 1` offsets into `order`: row `r` is read by `order[starts[r]..starts[r + 1]]`.
    pub(crate) starts: Arc<RawBuffer>,
    pub(crate) rows: usize,
    pub(crate) len: usize,
    /// Where a row is read by more than [`CHUNK`] elements: its elements in chunks, so that
    /// a scatter sums each chunk in one thread and then each row's chunks (a camera read by
    /// thousands of observations is not one thread's loop).
    pub(crate) chunks: Option<Chunks>,
}

/// Most elements of a row one thread sums in a scatter.
pub(crate) const CHUNK: usize = 32;

/// An index's elements in chunks of at most [`CHUNK`] of one row each, in the index's order.
#[derive(Clone)]
pub(crate) struct Chunks {
    /// Chunks in all.
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    pub(crate) count: usize,
    /// `count + 1` offsets into the index's `order`: chunk `c` is
    /// `order[starts[c]..starts[c + 1]]`.
    pub(crate) starts: Arc<RawBuffer>,
    /// `rows + 1` offsets into the chunks: row `r`'s are `row_chunks[r]..row_chunks[r + 1]`.
    pub(crate) row_chunks: Arc<RawBuffer>,
}

/// The chunks of a grouping by row (`starts`: `rows + 1` offsets), or `None` where no row
/// has more than [`CHUNK`] elements.
fn chunks_of(starts: &[u32]) -> Option<(Vec<u32>, Vec<u32>)> {
    if starts.windows(2).all(|w| (w[1] - w[0]) as usize <= CHUNK) {
        return None;
    }
    let mut chunk_starts = Vec::new();
    let mut row_chunks = Vec::with_capacity(starts.len());
    for w in starts.windows(2) {
        row_chunks.push(chunk_starts.len() as u32);
        chunk_starts.extend((w[0]..w[1]).step_by(CHUNK));
    }
    row_chunks.push(chunk_starts.len() as u32);
    chunk_starts.push(starts.last().copied().unwrap_or(0));
    Some((chunk_starts, row_chunks))
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("len", &self.len)
            .field("rows", &self.rows)
            .finish()
    }
}

impl Index {
    /// Entries (elements of a launch).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rows of the blocks it indexes.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

impl Device {
    /// An index into blocks of `rows` rows: element `k` of a launch reads row
    /// `entries[k]`. An entry out of range is an error here, before any launch.
    pub fn index(&self, entries: &[u32], rows: usize) -> Result<Index, Error> {
        if let Some((k, &e)) = entries
            .iter()
            .enumerate()
            .find(|&(_, &e)| e as usize >= rows)
        {
            return Err(Error::IndexOutOfRange {
                entry: k,
                row: e as usize,
                rows,
            });
        }
        if rows >= u32::MAX as usize || entries.len() >= u32::MAX as usize {
            return Err(Error::Unsupported(format!(
                "an index of {} entries into {rows} rows (at most 2^32 - 2 of each)",
                entries.len()
            )));
        }
        // Counting sort by row: stable, so each row's elements stay in element order.
        let mut starts = vec![0u32; rows + 1];
        for &e in entries {
            starts[e as usize + 1] += 1;
        }
        for r in 0..rows {
            starts[r + 1] += starts[r];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; entries.len()];
        for (k, &e) in entries.iter().enumerate() {
            order[next[e as usize] as usize] = k as u32;
            next[e as usize] += 1;
        }
        let raw = |b: Buffer<u32>| b.raw().clone();
        let chunks = match chunks_of(&starts) {
            Some((chunk_starts, row_chunks)) => Some(Chunks {
                count: chunk_starts.len() - 1,
                starts: raw(self.buffer(&chunk_starts)?),
                row_chunks: raw(self.buffer(&row_chunks)?),
            }),
            None => None,
        };
        Ok(Index {
            entries: raw(self.buffer(entries)?),
            order: raw(self.buffer(&order)?),
            starts: raw(self.buffer(&starts)?),
            rows,
            len: entries.len(),
            chunks,
        })
    }
}

impl Device {
    /// Scratch for a scatter pass's chunk partials, where its indices have chunks.
    #[cfg(feature = "gpu")]
    pub(crate) fn scatter_partials(
        &self,
        pass: &ScatterPass,
    ) -> Result<Option<Arc<RawBuffer>>, Error> {
        match pass.partial_words() {
            0 => Ok(None),
            words => Ok(Some(self.scratch(crate::raw::ScratchRole::Chunks, words)?)),
        }
    }
}

/// Where a per-element argument comes from in a launch with gathered arguments.
#[derive(Debug)]
pub enum Source<'b, T> {
    /// One value per element: element `k` reads entry `k`.
    Each(&'b Buffer<T>),
    /// Rows of a parameter block: element `k` reads row `index[k]` of the block.
    Gather(&'b Buffer<T>, &'b Index),
}

impl<T> Clone for Source<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Source<'_, T> {}

impl<T> Source<'_, T> {
    /// The untyped buffer and index, for generated launchers.
    #[doc(hidden)]
    pub fn parts(&self) -> (&Arc<RawBuffer>, Option<&Index>) {
        match self {
            Source::Each(b) => (b.raw(), None),
            Source::Gather(b, i) => (b.raw(), Some(i)),
        }
    }
}

/// One per-element argument of a launch with gathered arguments, as generated launchers
/// describe it. Not a stable API.
#[doc(hidden)]
#[derive(Debug)]
pub struct GatherField<'b> {
    /// 4-byte words of the argument (an f64 is two).
    pub words: u32,
    /// Its first word in the kernel's argument row.
    pub args_offset: u32,
    /// Its first word in the kernel's gradient row (None for `#[constant]` arguments).
    pub grad_offset: Option<u32>,
    /// Where it is read from.
    pub source: (&'b Arc<RawBuffer>, Option<&'b Index>),
    /// Where its gradient goes: one entry per element for an `Each` source, one per block
    /// row for a `Gather` source (None for values only, or `#[constant]`).
    pub sink: Option<&'b Arc<RawBuffer>>,
}

impl GatherField<'_> {
    /// Elements this field gives a launch.
    pub(crate) fn elements(&self) -> usize {
        match self.source.1 {
            Some(i) => i.len,
            None => self.source.0.words / self.words.max(1) as usize,
        }
    }
}

/// A [`GatherField`] that owns its buffers: recorded work outlives the launch call.
#[derive(Clone)]
pub(crate) struct Field {
    pub(crate) words: u32,
    pub(crate) args_offset: u32,
    pub(crate) grad_offset: Option<u32>,
    pub(crate) source: Arc<RawBuffer>,
    pub(crate) index: Option<Index>,
    pub(crate) sink: Option<Arc<RawBuffer>>,
}

impl From<&GatherField<'_>> for Field {
    fn from(f: &GatherField<'_>) -> Field {
        Field {
            words: f.words,
            args_offset: f.args_offset,
            grad_offset: f.grad_offset,
            source: f.source.0.clone(),
            index: f.source.1.cloned(),
            sink: f.sink.cloned(),
        }
    }
}

/// A gathered kernel's `params.gathered`: bit `k` set where argument `k` is read through an
/// index.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) fn gathered_mask(fields: &[Field]) -> u32 {
    fields
        .iter()
        .enumerate()
        .filter(|(_, f)| f.index.is_some())
        .fold(0, |mask, (k, _)| mask | 1 << k)
}

/// Copies the field's words from its source into the argument rows `args` (`in_words` per
/// element), on the CPU.
pub(crate) fn assemble_cpu(field: &Field, n: usize, in_words: usize, args: &mut [u32]) {
    let w = field.words as usize;
    let src = field.source.cpu_read();
    let index = field.index.as_ref().map(|i| i.entries.cpu_read());
    for k in 0..n {
        let row = index.as_ref().map_or(k, |i| i[k] as usize);
        let at = k * in_words + field.args_offset as usize;
        args[at..at + w].copy_from_slice(&src[row * w..(row + 1) * w]);
    }
}

/// One scatter of gradients into a sink: the gradient words of one or two arguments of the
/// same kind bound to it (both per element, or both rows of blocks of its rows), summed per
/// entry argument after argument (for rows: over the elements that read the row, in the
/// index's order), then written into the sink, or added to it where earlier passes wrote it.
/// Two at most, so that a pass binds at most six storage buffers (WebGPU guarantees eight).
#[derive(Clone)]
pub(crate) struct ScatterPass {
    pub(crate) fields: Vec<Field>,
    pub(crate) accumulate: bool,
    /// The scalars the words hold: an f64 kernel's gradients are summed as f64.
    pub(crate) precision: Precision,
}

impl ScatterPass {
    /// The sink every field of the pass writes.
    pub(crate) fn sink(&self) -> &Arc<RawBuffer> {
        self.fields[0]
            .sink
            .as_ref()
            .expect("scatter passes hold fields with sinks")
    }

    /// Whether its fields are rows of blocks (else per-element arguments).
    pub(crate) fn rows(&self) -> bool {
        self.fields[0].index.is_some()
    }

    /// The chunks of every field's index, where each has them (a sum in two passes).
    pub(crate) fn chunks(&self) -> Option<Vec<&Chunks>> {
        self.fields
            .iter()
            .map(|f| f.index.as_ref().and_then(|i| i.chunks.as_ref()))
            .collect()
    }

    /// Words of the chunks' partial sums (none without chunks).
    #[cfg(feature = "gpu")]
    pub(crate) fn partial_words(&self) -> usize {
        self.chunks().map_or(0, |c| {
            c.iter().map(|c| c.count).sum::<usize>() * self.fields[0].words as usize
        })
    }
}

/// The scatter passes of a launch's fields: each field with a gradient and a sink joins
/// the pass of the field before it with the same sink where that pass has room and the
/// same kind; a sink's later passes add to what its first wrote.
pub(crate) fn scatter_passes(fields: &[Field], precision: Precision) -> Vec<ScatterPass> {
    let mut passes: Vec<ScatterPass> = Vec::new();
    for f in fields.iter().filter(|f| f.grad_offset.is_some()) {
        let Some(sink) = &f.sink else { continue };
        let last = passes.iter_mut().rev().find(|p| p.sink().id == sink.id);
        match last {
            Some(p) if p.fields.len() < 2 && p.rows() == f.index.is_some() => {
                p.fields.push(f.clone());
            }
            Some(_) => passes.push(ScatterPass {
                fields: vec![f.clone()],
                accumulate: true,
                precision,
            }),
            None => passes.push(ScatterPass {
                fields: vec![f.clone()],
                accumulate: false,
                precision,
            }),
        }
    }
    passes
}

/// Operations that cost a by-rows launch as much as a byte of memory traffic: the H100
/// does about 20 float operations in the time it moves a byte; 16 leaves room for the
/// by-rows loop's dependent loads.
const OPS_PER_BYTE: u64 = 16;

/// The scatter pass of a launch of `spec` over `fields` that its kernel's by-rows entry
/// point ([`crate::spec::RowsEntry`]) can do instead: the first of a sink (nothing to add
/// to), of rows of one block read through indices of one shape, each row read by at most
/// [`CHUNK`] elements of each index (one thread's loop); and, where an element is read
/// through two indices and so computed from both sides, a second evaluation (its
/// operations, its own argument words and index entries read again) costing less than the
/// traffic it saves (the block's gradient words stored per element and read back by the
/// scatter, or, where other passes still need the gradient rows, only read back).
/// Measured on the H100 (BENCHMARKS.md): the edge residual 2.06x its pre-gathered kernel
/// by elements, 0.78x by rows; the logic-gate network (16 logits read per gate, 18
/// gradient words stored for the logits' pass anyway) slower by rows.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) fn rows_pass(
    spec: &KernelSpec,
    fields: &[Field],
    passes: &[ScatterPass],
) -> Option<usize> {
    let grad_words = spec.outputs.get(1).map_or(0, |o| o.words as u64);
    let own_words: u64 = fields
        .iter()
        .map(|f| {
            if f.index.is_some() {
                1
            } else {
                u64::from(f.words)
            }
        })
        .sum();
    let again_bytes = 4 * own_words + spec.work_per_element.div_ceil(OPS_PER_BYTE);
    passes.iter().position(|p| {
        let first = &p.fields[0];
        let rows = |f: &Field| f.index.as_ref().map(|i| i.rows);
        let one_block = p
            .fields
            .iter()
            .all(|f| f.words == first.words && rows(f) == rows(first));
        let short = p
            .fields
            .iter()
            .all(|f| f.index.as_ref().is_some_and(|i| i.chunks.is_none()));
        let sides = p.fields.len() as u64;
        // Per element: the scatter's reads (the pass's words and the order's entry, per
        // side), and the whole gradient row's store where no other pass reads it.
        let mut saved_bytes = 4 * sides * (u64::from(first.words) + 1);
        if passes.len() == 1 {
            saved_bytes += 4 * grad_words;
        }
        let cheap = sides == 1 || again_bytes < saved_bytes;
        !p.accumulate && one_block && short && cheap
    })
}

/// Runs a scatter pass on the CPU, from the gradient rows `grads` (`grad_words` 4-byte
/// words per element), in the order the GPU sums, in the pass's precision.
pub(crate) fn scatter_cpu(pass: &ScatterPass, grads: &[f32], grad_words: usize) {
    let mut out = pass.sink().cpu_write();
    match pass.precision {
        Precision::F32 => {
            let out: &mut [f32] = bytemuck::cast_slice_mut(&mut out[..]);
            scatter_in(pass, grads, grad_words, 1, out);
        }
        Precision::F64 => {
            // The CPU device's words are 4-byte aligned: the f64s are summed in copies.
            let grads: Vec<f64> = bytemuck::pod_collect_to_vec(grads);
            let mut sums: Vec<f64> = bytemuck::pod_collect_to_vec(&out[..]);
            scatter_in(pass, &grads, grad_words / 2, 2, &mut sums);
            out.copy_from_slice(bytemuck::cast_slice(&sums));
        }
    }
}

/// [`scatter_cpu`] over scalars `T`, `wps` 4-byte words each: `grad_words` and `out`
/// count scalars, the fields' words and offsets 4-byte words.
fn scatter_in<T>(pass: &ScatterPass, grads: &[T], grad_words: usize, wps: usize, out: &mut [T])
where
    T: Copy + Default + std::ops::Add<Output = T> + std::ops::AddAssign,
{
    let w = pass.fields[0].words as usize / wps;
    let word = |f: &Field, k: usize, j: usize| {
        grads[k * grad_words + f.grad_offset.unwrap_or(0) as usize / wps + j]
    };
    let put = |o: &mut T, s: T| *o = if pass.accumulate { *o + s } else { s };
    if !pass.rows() {
        for (k, row) in out.chunks_exact_mut(w).enumerate() {
            for (j, o) in row.iter_mut().enumerate() {
                let mut s = word(&pass.fields[0], k, j);
                for f in &pass.fields[1..] {
                    s += word(f, k, j);
                }
                put(o, s);
            }
        }
        return;
    }
    if let Some(chunks) = pass.chunks() {
        // Each chunk summed from 0, then each row's chunks, field after field: the GPU's
        // two passes.
        let groupings: Vec<_> = pass
            .fields
            .iter()
            .zip(&chunks)
            .filter_map(|(f, c)| {
                f.index.as_ref().map(|i| {
                    (
                        i.order.cpu_read(),
                        c.starts.cpu_read(),
                        c.row_chunks.cpu_read(),
                    )
                })
            })
            .collect();
        for (r, row) in out.chunks_exact_mut(w).enumerate() {
            for (j, o) in row.iter_mut().enumerate() {
                let mut s = T::default();
                for (f, (order, starts, row_chunks)) in pass.fields.iter().zip(&groupings) {
                    for c in row_chunks[r] as usize..row_chunks[r + 1] as usize {
                        let mut p = T::default();
                        for &k in &order[starts[c] as usize..starts[c + 1] as usize] {
                            p += word(f, k as usize, j);
                        }
                        s += p;
                    }
                }
                put(o, s);
            }
        }
        return;
    }
    let groupings: Vec<_> = pass
        .fields
        .iter()
        .filter_map(|f| f.index.as_ref())
        .map(|i| (i.order.cpu_read(), i.starts.cpu_read()))
        .collect();
    for (r, row) in out.chunks_exact_mut(w).enumerate() {
        for (j, o) in row.iter_mut().enumerate() {
            let mut s = T::default();
            for (f, (order, starts)) in pass.fields.iter().zip(&groupings) {
                for &k in &order[starts[r] as usize..starts[r + 1] as usize] {
                    s += word(f, k as usize, j);
                }
            }
            put(o, s);
        }
    }
}
