//! Which functions get the cooperative network adjoint (`emit_wgsl::network`): the
//! [`NetworkPlan`] read off the lowered IR, or none.
//!
//! The function must be, and be only, the network that kernel computes: per-element inputs
//! `x` (an array argument, `#[constant]` like every per-element word) into two dense layers
//! or more of 17 to 128 rows (computed as 32, 64 or 128, [`crate::emit_wgsl::padded_width`]; as
//! many as fit its workgroup memory, [`NetworkPlan::supported`]), each `tanh`, relu or the
//! sigmoid ([`ir::dense_layers`]), each after the first reading what the one before wrote;
//! output rows `y_o = b_o + w_o . h_L` ([`ir::dot_row`]) reading what the last wrote, as
//! many as the kernel computes at that width
//! ([`crate::emit_wgsl::max_outputs`]); and a loss of the `y_o` and the element's words
//! alone. Top-level loops of up to 4 trips are read as their trips one after another: an
//! output written as a loop over its rows, the loss summed inside, is those rows and that
//! loss; an array of outputs written by such a loop is its rows. Together the layers'
//! weights and biases and the output rows' must be every shared word, each once: the
//! kernel writes exactly those gradients. Anything else keeps the adjoint of one element a
//! thread.

use crate::abi::{ArgLayout, KernelKind};
use crate::emit_wgsl::{HiddenLayer, NetworkPlan, OutputRow, WordIndex};
use crate::ir::{self, Builder, DenseLayer, Function, LoopKind, Node, Op, ValueId};
use crate::signature::Precision;
use crate::{ad, opt};

/// The plan of `f` (a lowered primal, before unrolling) with `layout`, if the cooperative
/// kernel computes its adjoint (see the module doc): a network without per-element
/// gradients that the kernel supports ([`NetworkPlan::supported`]).
pub fn network_plan(layout: &ArgLayout, f: &Function) -> Option<NetworkPlan> {
    let per_element_grads = KernelKind::Adjoint.outputs(layout).len() > 1;
    network(layout, f).filter(|plan| !per_element_grads && plan.supported())
}

/// The plan of `f` with `layout`, if the cooperative value kernel computes its value
/// ([`NetworkPlan::value_supported`]), whatever its per-element gradients.
pub fn network_value_plan(layout: &ArgLayout, f: &Function) -> Option<NetworkPlan> {
    network(layout, f).filter(NetworkPlan::value_supported)
}

/// `f` read as a network (see the module doc), whichever of the cooperative kernels
/// support its shape.
fn network(layout: &ArgLayout, f: &Function) -> Option<NetworkPlan> {
    if layout.precision != Precision::F32 || layout.results != 1 {
        return None;
    }
    // Outputs written as a loop over the output rows, the loss summed inside it
    // (`samples::network(i, h, o)`), are those rows and that loss, each once.
    let peeled = peel_short_loops(f);
    let f = &peeled;
    let arrays = Arrays { f, layout };
    let shared = |v: ValueId| arrays.shared(v).is_some();
    let layers = ir::dense_layers(f, &shared);
    let [(_, first), .., (last_at, last)] = &layers[..] else {
        return None;
    };
    // The kernel's rows: the written ones, or more of them as padding.
    let widest = layers.iter().map(|(_, l)| l.rows as u32).max()?;
    let width = crate::emit_wgsl::padded_width(widest);
    let (x, inputs) = arrays.element(first.input)?;
    // Each layer after the first reads what the one before wrote, every row of it.
    let chained = layers.windows(2).all(|pair| {
        let [(before_at, before), (_, layer)] = pair else {
            return false;
        };
        matches!(f.node(layer.input).op, Op::Result(l, 0) if l == *before_at)
            && layer.columns == before.rows
    });
    let shapes = first.columns == inputs as usize
        && (layers.iter()).all(|(_, l)| l.input_index == (0, 1) && l.activation.is_some());
    if !chained || !shapes {
        return None;
    }
    // Every output row reads what the last layer wrote.
    let h_last = result_of(f, *last_at)?;
    let dot_rows: Vec<(ValueId, ir::DotRow)> = (0..f.nodes.len() as u32)
        .map(ValueId)
        .filter_map(|at| Some((at, ir::dot_row(f, at, &shared)?)))
        .collect();
    let reads_last = |row: &ir::DotRow| {
        row.input == h_last && row.input_index == (0, 1) && row.length == last.rows
    };
    if dot_rows.is_empty() || !dot_rows.iter().all(|(_, row)| reads_last(row)) {
        return None;
    }
    let ys: Vec<ValueId> = (dot_rows.iter())
        .map(|(at, _)| result_of(f, *at))
        .collect::<Option<_>>()?;
    let outputs: Vec<OutputRow> = (dot_rows.iter())
        .map(|(_, row)| {
            Some(OutputRow {
                weights: arrays.row_words(row.weights, row.weight_index, last.rows)?,
                bias: arrays.shared_word(row.init)?,
            })
        })
        .collect::<Option<_>>()?;
    let hidden_layers: Vec<HiddenLayer> = (layers.iter())
        .map(|(_, l)| arrays.hidden_layer(l, l.columns as u32))
        .collect::<Option<_>>()?;
    let plan = NetworkPlan {
        element_words: layout.words,
        first_input: x,
        inputs,
        hidden: width,
        layers: hidden_layers,
        outputs,
        loss: loss(f, &ys, layout.words)?,
        shared_words: layout.shared_words,
    };
    covers_every_shared_word(&plan).then_some(plan)
}

/// The most trips of a top-level loop that [`peel_short_loops`] writes out: a loop over
/// the output rows, as many as the kernel computes at any width.
const MAX_PEELED_TRIPS: i64 = crate::emit_wgsl::max_outputs(32) as i64;

/// `f` with its top-level loops of at most [`MAX_PEELED_TRIPS`] trips replaced by their
/// trips, one after another, optimized.
fn peel_short_loops(f: &Function) -> Function {
    let mut b = Builder::like(f);
    let mut map: Vec<ValueId> = Vec::with_capacity(f.nodes.len());
    // The carried values after each peeled loop, by its node.
    let mut peeled: Vec<Option<Vec<ValueId>>> = vec![None; f.nodes.len()];
    for (i, node) in f.nodes.iter().enumerate() {
        let m = |v: ValueId| map[v.index()];
        let id = match &node.op {
            Op::Loop(l) if l.kind == LoopKind::Forward && l.trip_count() <= MAX_PEELED_TRIPS => {
                let init: Vec<ValueId> = l.init.iter().map(|v| m(*v)).collect();
                let captures: Vec<ValueId> = l.captures.iter().map(|v| m(*v)).collect();
                let trip = (l.start..l.end, node.span);
                peeled[i] = Some(opt::inline_trips(&mut b, &l.body, trip, init, &captures));
                // Read only through its results, which now read the body's outputs.
                b.constant(0.0, node.span)
            }
            Op::Result(l, k) => match &peeled[l.index()] {
                Some(carried) => carried[*k as usize],
                None => b.push(node.op.map_operands(m), node.span, node.name.clone()),
            },
            op => b.push(op.map_operands(m), node.span, node.name.clone()),
        };
        map.push(id);
    }
    let outputs = f.outputs.iter().map(|o| map[o.index()]).collect();
    opt::optimize(&b.finish(outputs))
}

/// The node of `f` that reads loop `at`'s first carried value after its last trip.
fn result_of(f: &Function, at: ValueId) -> Option<ValueId> {
    let i = (f.nodes.iter()).position(|n| matches!(n.op, Op::Result(l, 0) if l == at))?;
    Some(ValueId(i as u32))
}

/// The lowered function's arrays of consecutive argument words.
struct Arrays<'a> {
    f: &'a Function,
    layout: &'a ArgLayout,
}

impl Arrays<'_> {
    /// `v` as an array of consecutive input words: `(first input, length)`.
    fn words(&self, v: ValueId) -> Option<(u32, u32)> {
        let Op::ArrayNew(ws) = &self.f.node(v).op else {
            return None;
        };
        let first = match self.f.node(*ws.first()?).op {
            Op::Input(i) => i,
            _ => return None,
        };
        let consecutive = ws
            .iter()
            .enumerate()
            .all(|(k, w)| matches!(self.f.node(*w).op, Op::Input(i) if i == first + k as u32));
        consecutive.then_some((first, ws.len() as u32))
    }

    /// `v` as an array of the element's words: `(first word, length)`.
    fn element(&self, v: ValueId) -> Option<(u32, u32)> {
        self.words(v)
            .filter(|(first, n)| first + n <= self.layout.words)
    }

    /// `v` as an array of shared words: `(first shared word, length)`.
    fn shared(&self, v: ValueId) -> Option<(u32, u32)> {
        let (first, n) = self.words(v)?;
        let shared = self.layout.words..self.layout.words + self.layout.shared_words;
        (shared.contains(&first) && shared.contains(&(first + n - 1)))
            .then(|| (first - self.layout.words, n))
    }

    /// `v` as one shared word: the input itself (a read at a constant index is folded).
    fn shared_word(&self, v: ValueId) -> Option<u32> {
        match self.f.node(v).op {
            Op::Input(i) if i >= self.layout.words => {
                let w = i - self.layout.words;
                (w < self.layout.shared_words).then_some(w)
            }
            _ => None,
        }
    }

    /// Layer `l` of `columns` columns with its weights and biases among the shared words,
    /// each inside its array, if it has an activation.
    fn hidden_layer(&self, l: &DenseLayer, columns: u32) -> Option<HiddenLayer> {
        let (w0, wn) = self.shared(l.weights)?;
        let (b0, bn) = self.shared(l.biases)?;
        let (offset, rs, cs) = l.weight_index;
        let rows = l.rows as i64;
        let last = offset + rs * (rows - 1) + cs * (columns as i64 - 1);
        let inside = offset >= 0 && rs >= 0 && cs >= 0 && last < wn as i64;
        let bias_inside = l.bias_offset >= 0 && l.bias_offset + rows <= bn as i64;
        let activation = l.activation?;
        (inside && bias_inside).then(|| HiddenLayer {
            weights: WordIndex {
                offset: w0 + offset as u32,
                row_stride: rs as u32,
                column_stride: cs as u32,
            },
            bias: b0 + l.bias_offset as u32,
            rows: l.rows as u32,
            activation,
        })
    }

    /// The shared words of a row `w[offset + stride * k]` of `length` terms.
    fn row_words(
        &self,
        weights: ValueId,
        (offset, stride): (i64, i64),
        length: usize,
    ) -> Option<WordIndex> {
        let (w0, wn) = self.shared(weights)?;
        let last = offset + stride * (length as i64 - 1);
        (offset >= 0 && stride > 0 && last < wn as i64).then(|| WordIndex {
            offset: w0 + offset as u32,
            row_stride: stride as u32,
            column_stride: 0,
        })
    }
}

/// The loss after the output rows: `f`'s value as a function of `ys` (its inputs `0..o`)
/// and the element's `words` (inputs `o..`), with its derivatives in `ys` (outputs
/// `[value, d/dy_0, ..]`), if it reads nothing else.
fn loss(f: &Function, ys: &[ValueId], words: u32) -> Option<Function> {
    let outputs = ys.len() as u32;
    let mut nodes: Vec<Node> = Vec::new();
    let mut map: Vec<Option<ValueId>> = vec![None; f.nodes.len()];
    let mut stack = vec![f.outputs[0]];
    // Depth first from the value; the copies are appended in the original order below.
    let mut needed = vec![false; f.nodes.len()];
    while let Some(v) = stack.pop() {
        if needed[v.index()] {
            continue;
        }
        needed[v.index()] = true;
        if !ys.contains(&v) {
            stack.extend(f.node(v).op.operands());
        }
    }
    for (i, node) in f.nodes.iter().enumerate() {
        if !needed[i] {
            continue;
        }
        let y = ys.iter().position(|y| y.index() == i);
        let op = match &node.op {
            _ if let Some(o) = y => Op::Input(o as u32),
            Op::Input(w) if *w < words => Op::Input(outputs + w),
            Op::Const(_) | Op::Int(_) => node.op.clone(),
            op @ (Op::Call(..)
            | Op::Cmp(..)
            | Op::Not(_)
            | Op::And(..)
            | Op::Or(..)
            | Op::IntBin(..)
            | Op::IntToF32(_)
            | Op::Select { .. }) => {
                // Every operand was marked needed above, so it is copied by now.
                op.map_operands(|v| map[v.index()].expect("operands come before their readers"))
            }
            _ => return None,
        };
        map[i] = Some(ValueId(nodes.len() as u32));
        nodes.push(Node {
            op,
            ty: node.ty,
            span: node.span,
            name: node.name.clone(),
        });
    }
    let value = map[f.outputs[0].index()]?;
    let primal = Function {
        num_inputs: outputs + words,
        nodes,
        outputs: vec![value],
    };
    let mut rev = ad::reverse(&opt::optimize(&primal));
    rev.outputs.truncate(1 + ys.len());
    Some(opt::optimize(&rev))
}

/// Whether the plan's weights, biases and output row are every shared word, each once.
fn covers_every_shared_word(p: &NetworkPlan) -> bool {
    // Times each word is written; a word past the shared words counts as written twice.
    let mut seen = vec![0u8; p.shared_words as usize];
    let mut outside = false;
    let mut mark = |w: u32| match seen.get_mut(w as usize) {
        Some(s) => *s = s.saturating_add(1),
        None => outside = true,
    };
    let columns = std::iter::once(p.inputs).chain(p.layers.iter().map(|l| l.rows));
    for (layer, columns) in p.layers.iter().zip(columns) {
        let w = layer.weights;
        for j in 0..layer.rows {
            for k in 0..columns {
                mark(w.offset + w.row_stride * j + w.column_stride * k);
            }
            mark(layer.bias + j);
        }
    }
    let last = p.layers.last().map_or(0, |l| l.rows);
    for out in &p.outputs {
        for k in 0..last {
            mark(out.weights.offset + out.weights.row_stride * k);
        }
        mark(out.bias);
    }
    !outside && seen.iter().all(|s| *s == 1)
}

#[cfg(test)]
mod tests;
