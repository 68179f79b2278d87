//! IR to WGSL: one compute kernel per [`KernelKind`], one thread per batch element.
//!
//! The output is meant to be read in review: a header says which function and which buffers,
//! every value is a `let` named after the Rust binding it came from (`d_x` is the adjoint
//! of `x`), and the names match the CPU versions emitted by [`crate::emit_rust`].

use crate::abi::{self, ArgLayout, KernelKind};
use crate::ir::{Function, Loop, LoopInput, LoopKind, Op, Ty, ValueId};
use crate::names::{fresh, local_names_with, reserved};
use crate::ops::{Func, WGSL_HELPERS, WgslForm, wgsl_helper, wgsl_helper_deps};
use std::collections::BTreeSet;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// A WGSL f32 literal (non-finite values as bit casts: WGSL has no literal for them).
pub fn f32_literal(v: f64) -> String {
    let x = v as f32;
    if x.is_nan() {
        "bitcast<f32>(0x7fc00000u)".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "bitcast<f32>(0x7f800000u)".into()
        } else {
            "bitcast<f32>(0xff800000u)".into()
        }
    } else if x.is_sign_negative() {
        format!("({x:?}f)")
    } else {
        format!("{x:?}f")
    }
}

struct Ctx<'a> {
    f: &'a Function,
    names: Vec<String>,
    /// For each loop node: the `var`s holding its carried values.
    carried: HashMap<usize, Vec<String>>,
    /// For each recording loop node: its tape.
    tapes: HashMap<usize, String>,
    /// Values that are a `#[shared]` word (by node): an index into consecutive ones reads
    /// `shared_args` directly instead of building an array.
    shared_word: HashMap<usize, u32>,
    /// Whether the shared words are in a uniform buffer (`array<vec4<f32>, _>`).
    shared_uniform: bool,
    /// Statements to write right after node `i` (the shared gradient's sums, as soon as
    /// their words are computed: fewer values live at once).
    after: HashMap<usize, String>,
}

impl<'a> Ctx<'a> {
    fn new(f: &'a Function, taken: &mut HashSet<String>) -> Self {
        Ctx {
            f,
            names: local_names_with(f, taken),
            carried: HashMap::new(),
            tapes: HashMap::new(),
            shared_word: HashMap::new(),
            shared_uniform: false,
            after: HashMap::new(),
        }
    }

    fn operand(&self, v: ValueId) -> String {
        match self.f.node(v).op {
            Op::Const(c) => f32_literal(c),
            Op::Int(k) => format!("{k}i"),
            _ => self.names[v.index()].clone(),
        }
    }

    /// `let` statements (and loops) for every node of the function but its inputs, which
    /// the caller binds to their names.
    fn emit_nodes(
        &mut self,
        taken: &mut HashSet<String>,
        indent: &str,
        out: &mut String,
        helpers: &mut BTreeSet<&'static str>,
    ) {
        let f = self.f;
        for (i, node) in f.nodes.iter().enumerate() {
            match &node.op {
                Op::Input(_) | Op::Const(_) | Op::Int(_) => {}
                Op::Loop(l) => self.emit_loop(i, l, taken, indent, out, helpers),
                Op::Result(l, k) => {
                    let var = &self.carried[&l.index()][*k as usize];
                    let _ = writeln!(out, "{indent}let {} = {var};", self.names[i]);
                }
                op => {
                    let e = self.expr(op, helpers);
                    let _ = writeln!(out, "{indent}let {} = {e};", self.names[i]);
                }
            }
            if let Some(after) = self.after.remove(&i) {
                out.push_str(&after);
            }
        }
    }

    /// A loop: `var`s for its carried values, the loop, its body (inputs bound to the
    /// index, the carried values, the captures and the tape), the carried values updated.
    fn emit_loop(
        &mut self,
        i: usize,
        l: &Loop,
        taken: &mut HashSet<String>,
        indent: &str,
        out: &mut String,
        helpers: &mut BTreeSet<&'static str>,
    ) {
        let body = &l.body;
        let c = l.init.len();
        let input_name = |w: usize, fallback: &str| {
            body.input_name(w as u32)
                .map_or_else(|| fallback.to_string(), crate::names::sanitize)
        };
        let index = fresh(taken, &input_name(0, "i"));
        let vars: Vec<String> = (0..c)
            .map(|k| fresh(taken, &format!("{}_next", input_name(1 + k, "carried"))))
            .collect();
        let trip = l.trip_count();
        let what = match l.kind {
            LoopKind::Forward => "".to_string(),
            LoopKind::Recording => format!(
                "; it records its {c} carried values at every iteration for the reverse pass \
                 (a tape of {trip} x {c} words: recording costs memory, recomputing would \
                 cost a pass per iteration)"
            ),
            LoopKind::Reverse { tape, .. } if self.tapes.contains_key(&tape.index()) => {
                "; the adjoint of a loop: iterations in reverse, each iteration's carried \
                 values read from the forward loop's tape"
                    .to_string()
            }
            LoopKind::Reverse { .. } => "; the adjoint of a loop: iterations in reverse \
                 (its body needs none of the forward loop's carried values: nothing recorded)"
                .to_string(),
        };
        let _ = writeln!(out, "{indent}// {trip} iterations{what}.");
        for (var, init) in vars.iter().zip(&l.init) {
            let _ = writeln!(out, "{indent}var {var} = {};", self.operand(*init));
        }
        if l.kind == LoopKind::Recording {
            let tape = fresh(taken, "tape");
            let _ = writeln!(
                out,
                "{indent}var {tape}: array<f32, {}>;",
                (trip as usize * c).max(1)
            );
            self.tapes.insert(i, tape);
        }
        let (start, end) = (l.start, l.end);
        match l.kind {
            LoopKind::Reverse { .. } => {
                let _ = writeln!(
                    out,
                    "{indent}for (var {index}: i32 = {}i; {index} >= {start}i; {index}--) {{",
                    end - 1
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{indent}for (var {index}: i32 = {start}i; {index} < {end}i; {index}++) {{"
                );
            }
        }
        let inner = format!("{indent}    ");
        let mut bctx = Ctx::new(body, taken);
        bctx.shared_uniform = self.shared_uniform;
        if let Some(tape) = self.tapes.get(&i) {
            for (k, var) in vars.iter().enumerate() {
                let v = if l.carried_ty(k) == Ty::Bool {
                    format!("select(0.0f, 1.0f, {var})")
                } else {
                    var.clone()
                };
                let at = tape_index(&index, start, c, k);
                let _ = writeln!(out, "{inner}{tape}[{at}] = {v};");
            }
        }
        // The body's inputs: [i, carried..., captures..., taped...].
        let taped_from = match l.kind {
            // No tape when the body reads no taped value (the forward loop did not record).
            LoopKind::Reverse { tape, taped } => self
                .tapes
                .get(&tape.index())
                .map(|t| (t.clone(), tape, taped)),
            _ => None,
        };
        // Inputs read the index, the carried `var`s and the captures by their own names
        // (the body computes everything before the carried values change); taped values
        // are read into `let`s.
        let used = body.used_inputs();
        for (n, node) in body.nodes.iter().enumerate() {
            let Op::Input(w) = node.op else { continue };
            let w = w as usize;
            if !used[w] {
                continue;
            }
            match l.input(w) {
                LoopInput::Index => bctx.names[n] = index.clone(),
                LoopInput::Carried(k) => bctx.names[n] = vars[k].clone(),
                LoopInput::Capture(j) => {
                    let outer = l.captures[j];
                    bctx.names[n] = self.operand(outer);
                    if let Some(k) = self.shared_word.get(&outer.index()) {
                        bctx.shared_word.insert(n, *k);
                    }
                }
                LoopInput::Taped(k) => {
                    let (tape, tape_loop, taped) = taped_from.clone().expect("a reverse loop");
                    let read = format!("{tape}[{}]", tape_index(&index, start, taped as usize, k));
                    let bool_taped = match &self.f.node(tape_loop).op {
                        Op::Loop(tl) => tl.carried_ty(k) == Ty::Bool,
                        _ => false,
                    };
                    let src = if bool_taped {
                        format!("{read} != 0.0f")
                    } else {
                        read
                    };
                    let _ = writeln!(out, "{inner}let {} = {src};", bctx.names[n]);
                }
            }
        }
        bctx.emit_nodes(taken, &inner, out, helpers);
        let outs: Vec<String> = body.outputs.iter().map(|o| bctx.operand(*o)).collect();
        // An output that is a carried value itself must be read before any is assigned.
        if outs
            .iter()
            .zip(&vars)
            .any(|(o, v)| o != v && vars.contains(o))
        {
            let temps: Vec<String> = vars
                .iter()
                .map(|v| fresh(taken, &format!("{v}_new")))
                .collect();
            for (t, o) in temps.iter().zip(&outs) {
                let _ = writeln!(out, "{inner}let {t} = {o};");
            }
            for (var, t) in vars.iter().zip(&temps) {
                let _ = writeln!(out, "{inner}{var} = {t};");
            }
        } else {
            for (var, o) in vars.iter().zip(&outs) {
                if var != o {
                    let _ = writeln!(out, "{inner}{var} = {o};");
                }
            }
        }
        let _ = writeln!(out, "{indent}}}");
        self.carried.insert(i, vars);
    }

    fn expr(&self, op: &Op, helpers: &mut BTreeSet<&'static str>) -> String {
        match op {
            Op::Input(_) | Op::Const(_) | Op::Int(_) | Op::Loop(_) | Op::Result(..) => {
                unreachable!("inputs, constants and loops are not lets")
            }
            Op::IntBin(o, a, b) => {
                format!("{} {} {}", self.operand(*a), o.symbol(), self.operand(*b))
            }
            Op::IntToF32(a) => format!("f32({})", self.operand(*a)),
            // The value; its derivative was given by the user (used by the AD passes).
            Op::CustomGrad { value, .. } => self.operand(*value),
            Op::Index { elems, index } => {
                let words: Vec<Option<u32>> = elems
                    .iter()
                    .map(|v| self.shared_word.get(&v.index()).copied())
                    .collect();
                if let Some(Some(first)) = words.first()
                    && words
                        .iter()
                        .enumerate()
                        .all(|(k, w)| *w == Some(first + k as u32))
                {
                    // Consecutive shared words: read the buffer at the index.
                    let at = format!(
                        "{first}u + u32(clamp({}, 0i, {}i))",
                        self.operand(*index),
                        elems.len() - 1
                    );
                    return if self.shared_uniform {
                        format!("shared_args[({at}) / 4u][({at}) % 4u]")
                    } else {
                        format!("shared_args[{at}]")
                    };
                }
                let e: Vec<String> = elems.iter().map(|v| self.operand(*v)).collect();
                format!(
                    "array<f32, {}>({})[clamp({}, 0i, {}i)]",
                    e.len(),
                    e.join(", "),
                    self.operand(*index),
                    e.len() - 1
                )
            }
            Op::Cmp(c, a, b) => format!("{} {} {}", self.operand(*a), c.symbol(), self.operand(*b)),
            Op::Not(a) => format!("!{}", self.operand(*a)),
            Op::And(a, b) => format!("{} && {}", self.operand(*a), self.operand(*b)),
            Op::Or(a, b) => format!("{} || {}", self.operand(*a), self.operand(*b)),
            Op::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "select({}, {}, {})",
                self.operand(*otherwise),
                self.operand(*then),
                self.operand(*cond)
            ),
            Op::Call(func, args) => {
                let a: Vec<String> = args.iter().map(|v| self.operand(*v)).collect();
                if let Func::Powi(n) = func {
                    return powi(&a[0], *n, helpers);
                }
                match func.wgsl() {
                    WgslForm::Infix(op) => format!("{} {op} {}", a[0], a[1]),
                    WgslForm::Prefix(op) => format!("{op}{}", a[0]),
                    WgslForm::Builtin(name) => format!("{name}({})", a.join(", ")),
                    WgslForm::Helper(name) => {
                        helpers.insert(name);
                        helpers.extend(wgsl_helper_deps(name));
                        format!("{name}({})", a.join(", "))
                    }
                    WgslForm::Template(t) => {
                        let mut s = t.to_string();
                        for (i, x) in a.iter().enumerate() {
                            s = s.replace(&format!("{{{i}}}"), x);
                        }
                        s
                    }
                }
            }
        }
    }
}

/// Where carried value `k` of iteration `index` sits in a tape of `words` per iteration.
fn tape_index(index: &str, start: i64, words: usize, k: usize) -> String {
    let mut at = if start == 0 {
        index.to_string()
    } else {
        format!("({index} - {start}i)")
    };
    if words != 1 {
        at = format!("{at} * {words}i");
    }
    if k != 0 {
        at = format!("{at} + {k}i");
    }
    at
}

/// `i * k` for the first vector of element `i`, or just `i`.
fn scaled_index(k: u32) -> String {
    if k == 1 {
        "i".to_string()
    } else {
        format!("i * {k}u")
    }
}

/// `x.powi(n)`: small exponents as products (exact, like Rust's), others by the helper.
fn powi(x: &str, n: i32, helpers: &mut BTreeSet<&'static str>) -> String {
    match n {
        0 => "1.0f".into(),
        1 => x.into(),
        2 => format!("{x} * {x}"),
        3 => format!("{x} * {x} * {x}"),
        -1 => format!("1.0f / {x}"),
        _ => {
            helpers.insert("gf_powi");
            format!("gf_powi({x}, {n})")
        }
    }
}

/// Emits the WGSL module of one kernel of a function.
///
/// `signature` is the Rust signature for the header comment; `f` is the (optimized) IR
/// whose outputs are, for [`KernelKind::Forward`], the value, and for
/// [`KernelKind::Adjoint`] the value followed by one gradient word per argument word. An
/// adjoint with `#[shared]` arguments sums their gradients over the batch, and takes the
/// reverse pass's seed as one more input ([`crate::ad::vjp`]): the kernel seeds 1 for
/// elements in the batch and 0 past its end.
pub fn emit_kernel(signature: &str, layout: &ArgLayout, kind: KernelKind, f: &Function) -> String {
    let mut taken = reserved();
    let mut ctx = Ctx::new(f, &mut taken);
    let words = layout.words;
    let outputs = kind.outputs(layout);
    let wg = abi::WORKGROUP_SIZE;
    let mut helpers = BTreeSet::new();
    let mut body = String::new();

    // Loads: one per argument word used; shared words after the element's (then, in an
    // adjoint that sums shared gradients, the seed).
    let mut loads = vec![None; f.num_inputs as usize];
    for (i, node) in f.nodes.iter().enumerate() {
        if let Op::Input(w) = node.op {
            loads[w as usize] = Some(i);
        }
    }
    let lanes = abi::vector_lanes(words);
    const COMPONENTS: [&str; 4] = ["x", "y", "z", "w"];
    for chunk in 0..words / lanes {
        let used: Vec<(u32, usize)> = (chunk * lanes..(chunk + 1) * lanes)
            .filter_map(|w| loads[w as usize].map(|i| (w, i)))
            .collect();
        if used.is_empty() {
            continue;
        }
        let idx = if chunk == 0 {
            "in_base".to_string()
        } else {
            format!("in_base + {chunk}u")
        };
        if lanes == 1 {
            let _ = writeln!(body, "    let {} = args[{idx}];", ctx.names[used[0].1]);
        } else {
            let _ = writeln!(body, "    let args_{chunk} = args[{idx}];");
            for (w, i) in used {
                let c = COMPONENTS[(w % lanes) as usize];
                let _ = writeln!(body, "    let {} = args_{chunk}.{c};", ctx.names[i]);
            }
        }
    }
    let shared_words = layout.shared_words;
    let shared_loads = &loads[words as usize..(words + shared_words) as usize];
    let uniform = abi::shared_in_uniform(shared_words);
    ctx.shared_uniform = uniform;
    for (k, load) in shared_loads.iter().enumerate() {
        if let Some(i) = load {
            let read = if uniform {
                format!("shared_args[{}u].{}", k / 4, COMPONENTS[k % 4])
            } else {
                format!("shared_args[{k}u]")
            };
            let _ = writeln!(body, "    let {} = {read};", ctx.names[*i]);
        }
    }
    for (k, load) in shared_loads.iter().enumerate() {
        if let Some(i) = load {
            ctx.shared_word.insert(*i, k as u32);
        }
    }
    let reduces = kind == KernelKind::Adjoint && shared_words > 0;
    if reduces {
        assert_eq!(
            f.num_inputs,
            words + shared_words + 1,
            "an adjoint that sums shared gradients takes its seed as its last input"
        );
        if let Some(seed) = loads[(words + shared_words) as usize] {
            let _ = writeln!(
                body,
                "    // The adjoint's seed: elements past the end add nothing to the sums.\n    \
                 let {} = select(0.0f, 1.0f, in_batch);",
                ctx.names[seed]
            );
        }
    }
    // With a shared gradient, each thread adds up the shared gradients of several elements
    // in registers (`sums`), and the workgroup sums them once after its last element.
    let mut sums = Vec::new();
    let mut workgroup_sum = String::new();
    if reduces {
        let first = f.outputs.len() - shared_words as usize;
        for k in 0..shared_words {
            let out = f.outputs[first + k as usize];
            // A word no gradient flows to (a large table read at a few places) needs no
            // sum: its partials are stored as zeros below.
            if matches!(f.nodes[out.index()].op, Op::Const(c) if c == 0.0) {
                sums.push(None);
                continue;
            }
            let name = fresh(&mut taken, &format!("sum_{}", layout.word_name(words + k)));
            let arg = layout.word_label(words + k);
            let add = format!("    {name} += {}; // d/d {arg}\n", ctx.operand(out));
            // Right after the word is computed (at once if it is an input or constant).
            match f.nodes[out.index()].op {
                Op::Input(_) | Op::Const(_) | Op::Int(_) => body.push_str(&add),
                _ => ctx.after.entry(out.index()).or_default().push_str(&add),
            }
            sums.push(Some(name));
        }
        // Runs of consecutive words: summed 8 at a time, or zero.
        let mut k = 0u32;
        while k < shared_words {
            let zero = sums[k as usize].is_none();
            let mut end = k + 1;
            while end < shared_words
                && sums[end as usize].is_none() == zero
                && (zero || end - k < abi::REDUCE_LANES)
            {
                end += 1;
            }
            let count = end - k;
            if zero {
                let _ = writeln!(
                    workgroup_sum,
                    "    // d/d {}{} is zero.\n    \
                     for (var word = lid; word < {count}u; word += {wg}u) {{\n        \
                     shared_partials[group * {shared_words}u + {k}u + word] = 0.0f;\n    }}",
                    layout.word_label(words + k),
                    if count > 1 {
                        format!(" .. {}", layout.word_label(words + end - 1))
                    } else {
                        String::new()
                    },
                );
            } else {
                // Every word of this run has a sum.
                let run = sums[k as usize..end as usize].iter().flatten();
                for (j, sum) in run.enumerate() {
                    let at = match j {
                        0 => "lid".to_string(),
                        j => format!("{}u + lid", j as u32 * wg),
                    };
                    let _ = writeln!(workgroup_sum, "    reduce_stage[{at}] = {sum};");
                }
                let _ = writeln!(
                    workgroup_sum,
                    "    {REDUCE_STAGE_FN}(lid, group, {k}u, {count}u);"
                );
            }
            k = end;
        }
    }
    ctx.emit_nodes(&mut taken, "    ", &mut body, &mut helpers);
    // Stores.
    let grad_list = layout.grad_words();
    let grad_count = grad_list.len() as u32;
    let staged = kind == KernelKind::Adjoint && abi::stage_gradients(grad_count, reduces);
    // Barriers need every thread: threads past the end compute on the last element and
    // store nothing, instead of returning early.
    let guarded = staged || reduces;
    let grad_name = |k: u32| layout.word_label(grad_list[k as usize]);
    let results = layout.results;
    // What output word k of a buffer is, for the comment on its store.
    let label = |name: &str, k: u32| -> String {
        match name {
            "values" if results == 1 => "the value".to_string(),
            "values" => format!("result[{k}]"),
            "jacobians" => format!(
                "d result[{}] / d {}",
                k / grad_count.max(1),
                grad_name(k % grad_count.max(1))
            ),
            _ => grad_name(k),
        }
    };
    let mut out_idx = 0usize;
    for (_, w, name) in &outputs {
        let staged = staged && *name == "grads";
        if *w == 1 {
            let v = ctx.operand(f.outputs[out_idx]);
            if guarded {
                let _ = writeln!(
                    body,
                    "    if (in_batch) {{\n        {name}[i] = {v};\n    }}"
                );
            } else {
                let _ = writeln!(body, "    {name}[i] = {v};");
            }
            out_idx += 1;
        } else if staged {
            for k in 0..*w {
                let arg = grad_name(k);
                let v = ctx.operand(f.outputs[out_idx + k as usize]);
                let _ = writeln!(
                    body,
                    "    grad_stage[lid * {w}u + {k}u] = {v}; // d/d {arg}"
                );
            }
            let _ = writeln!(body, "    workgroupBarrier();");
            let _ = writeln!(
                body,
                "    // The group's gradients are contiguous in {name}: consecutive threads store\n    \
                 // consecutive words."
            );
            let _ = writeln!(body, "    let group_base = (i - lid) * {w}u;");
            let _ = writeln!(body, "    for (var part = 0u; part < {w}u; part++) {{");
            let _ = writeln!(body, "        let word = part * {wg}u + lid;");
            let _ = writeln!(body, "        if (group_base + word < params.n * {w}u) {{");
            let _ = writeln!(
                body,
                "            {name}[group_base + word] = grad_stage[word];"
            );
            let _ = writeln!(body, "        }}\n    }}");
            out_idx += *w as usize;
        } else {
            let glanes = abi::vector_lanes(*w);
            let indent = if guarded {
                let _ = writeln!(body, "    if (in_batch) {{");
                "        "
            } else {
                "    "
            };
            // `out_base` for the gradients (the common case), `values_base`... for others.
            let base = if *name == "grads" {
                "out_base".to_string()
            } else {
                format!("{name}_base")
            };
            let _ = writeln!(body, "{indent}let {base} = {};", scaled_index(w / glanes));
            for chunk in 0..w / glanes {
                let idx = if chunk == 0 {
                    base.clone()
                } else {
                    format!("{base} + {chunk}u")
                };
                let words_here = chunk * glanes..(chunk + 1) * glanes;
                let args: Vec<String> = words_here.clone().map(|k| label(name, k)).collect();
                let vals: Vec<String> = words_here
                    .map(|k| ctx.operand(f.outputs[out_idx + k as usize]))
                    .collect();
                let value = if glanes == 1 {
                    vals[0].clone()
                } else {
                    format!("{}({})", abi::vector_type(glanes), vals.join(", "))
                };
                let _ = writeln!(
                    body,
                    "{indent}{name}[{idx}] = {value}; // {}{}",
                    if *name == "grads" { "d/d " } else { "" },
                    args.join(", ")
                );
            }
            if guarded {
                let _ = writeln!(body, "    }}");
            }
            out_idx += *w as usize;
        }
    }
    let mut s = String::new();
    let what = match kind {
        KernelKind::Forward => "forward (value) kernel",
        KernelKind::Adjoint => "adjoint (value and gradient) kernel",
        KernelKind::Jacobian => "Jacobian (values and Jacobian) kernel",
    };
    let _ = writeln!(s, "// gradfuse {what} of `{signature}`.");
    if reduces {
        let _ = writeln!(
            s,
            "// Each thread takes params.per_thread batch elements i, {wg} apart. Element i's words:"
        );
    } else {
        let _ = writeln!(s, "// One thread per batch element i. Element i's words:");
    }
    let arg_names: Vec<String> = (0..words).map(|w| layout.word_label(w)).collect();
    let _ = writeln!(s, "//   args[{words}i ..]: {}", arg_names.join(", "));
    if shared_words > 0 {
        let names: Vec<String> = (words..words + shared_words)
            .map(|w| layout.word_label(w))
            .collect();
        let _ = writeln!(
            s,
            "// and the whole batch's {shared_words} shared words{}: {}",
            if uniform {
                " (shared_args, a uniform buffer, 4 to a vec4)"
            } else {
                " (shared_args)"
            },
            names.join(", ")
        );
        if reduces {
            let _ = writeln!(
                s,
                "//   shared_partials[{shared_words}g ..]: workgroup g's sum of d/d shared_args"
            );
        }
    }
    for (_, w, name) in &outputs {
        if *w == 1 {
            let _ = writeln!(s, "//   {name}[i]: the value");
        } else if *name == "values" {
            let _ = writeln!(s, "//   {name}[{w}i ..]: the result's {w} words");
        } else if *name == "jacobians" {
            let _ = writeln!(
                s,
                "//   {name}[{w}i ..]: the Jacobian, row-major: for each result word, its \
                 derivative in each of the {grad_count} argument words with a gradient"
            );
        } else if *w == words {
            let _ = writeln!(
                s,
                "//   {name}[{w}i ..]: its derivative in each argument word, in the same order"
            );
        } else {
            let names: Vec<String> = (0..*w).map(grad_name).collect();
            let _ = writeln!(
                s,
                "//   {name}[{w}i ..]: its derivative in {} (#[constant] words have none)",
                names.join(", ")
            );
        }
    }
    let _ = writeln!(s);
    if reduces {
        let _ = writeln!(
            s,
            "struct Params {{\n    n: u32,\n    per_thread: u32,\n}}\n"
        );
    } else {
        let _ = writeln!(s, "struct Params {{\n    n: u32,\n}}\n");
    }
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<uniform> params: Params;",
        abi::PARAMS_BINDING
    );
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<storage, read> args: array<{}>;",
        abi::ARGS_BINDING,
        abi::vector_type(lanes)
    );
    for (binding, w, name) in &outputs {
        let _ = writeln!(
            s,
            "@group(0) @binding({binding}) var<storage, read_write> {name}: array<{}>;",
            abi::vector_type(abi::vector_lanes(*w))
        );
    }
    if uniform && shared_words > 0 {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<uniform> shared_args: array<vec4<f32>, {}>;",
            abi::SHARED_BINDING,
            shared_words.div_ceil(4)
        );
    } else if shared_words > 0 {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> shared_args: array<f32>;",
            abi::SHARED_BINDING
        );
    }
    if reduces {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read_write> shared_partials: array<f32>;",
            abi::PARTIALS_BINDING
        );
    }
    if staged {
        let _ = writeln!(
            s,
            "var<workgroup> grad_stage: array<f32, {}>;",
            wg * grad_count
        );
    }
    if reduces {
        let _ = writeln!(
            s,
            "var<workgroup> reduce_stage: array<f32, {}>;",
            wg * abi::REDUCE_LANES
        );
        let _ = write!(s, "\n{}", reduce_stage_fn(shared_words));
    }
    for (name, _, src) in WGSL_HELPERS {
        if helpers.contains(name) {
            let _ = write!(s, "\n{src}\n");
        }
    }
    debug_assert!(helpers.iter().all(|h| wgsl_helper(h).is_some()));
    let _ = writeln!(s);
    let _ = writeln!(s, "@compute @workgroup_size({wg})");
    if reduces {
        let _ = writeln!(
            s,
            "fn {}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{",
            kind.entry_point(),
        );
        let _ = writeln!(
            s,
            "    // Workgroup `group` takes params.per_thread runs of {wg} consecutive elements (wide\n    \
             // dispatches use the second dimension, at most {} groups per dimension). Each\n    \
             // thread adds up the shared gradients of its elements in registers; the workgroup\n    \
             // sums them once, in a fixed order (deterministic, no atomics), and a second kernel\n    \
             // sums the workgroups' partials.",
            abi::MAX_WORKGROUPS_PER_DIM
        );
        let _ = writeln!(s, "    let group = wid.x + wid.y * groups.x;");
        let _ = writeln!(s, "    let per_thread = params.per_thread;");
        for sum in sums.iter().flatten() {
            let _ = writeln!(s, "    var {sum} = 0.0f;");
        }
        let _ = writeln!(
            s,
            "    for (var nth = 0u; nth < per_thread; nth++) {{\n        \
             let group_first = (group * per_thread + nth) * {wg}u;\n        \
             // Runs wholly past the end are skipped by the whole workgroup at once.\n        \
             if (group_first >= params.n) {{\n            break;\n        }}\n        \
             let i = group_first + lid;\n        \
             // Every thread reaches the barriers: threads past the end compute on the last\n        \
             // element and store and add nothing.\n        \
             let in_batch = i < params.n;\n        \
             let elem = min(i, params.n - 1u);\n        \
             let in_base = elem * {}u;",
            words / lanes
        );
        for line in body.lines() {
            if line.is_empty() {
                s.push('\n');
            } else {
                let _ = writeln!(s, "    {line}");
            }
        }
        if staged {
            let _ = writeln!(
                s,
                "        // The next element's gradients wait until these are stored.\n        \
                 workgroupBarrier();"
            );
        }
        s.push_str("    }\n");
        s.push_str(&workgroup_sum);
        s.push_str("}\n");
        return s;
    }
    let _ = writeln!(
        s,
        "fn {}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>{}) {{",
        kind.entry_point(),
        if guarded {
            ", @builtin(local_invocation_index) lid: u32"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "    // Wide batches use the second dispatch dimension (at most {} groups per dimension).",
        abi::MAX_WORKGROUPS_PER_DIM
    );
    let _ = writeln!(s, "    let i = gid.x + gid.y * groups.x * {wg}u;");
    if guarded {
        let _ = writeln!(
            s,
            "    // Every thread reaches the barrier: threads past the end compute on the last\n    \
             // element and store nothing.\n    \
             let in_batch = i < params.n;\n    \
             let elem = min(i, params.n - 1u);"
        );
        let _ = writeln!(s, "    let in_base = elem * {}u;", words / lanes);
    } else {
        let _ = writeln!(s, "    if (i >= params.n) {{\n        return;\n    }}");
        let _ = writeln!(s, "    let in_base = {};", scaled_index(words / lanes));
    }
    s.push_str(&body);
    s.push_str("}\n");
    s
}

/// The name of the WGSL helper with which an adjoint kernel sums its shared gradient over
/// the workgroup (generated names never take it).
pub const REDUCE_STAGE_FN: &str = "gf_reduce_stage";

/// The adjoint kernel's sum over the workgroup of the 8 words in `reduce_stage` (lane `l`'s
/// word `k` at `k * 256 + l`), written to `shared_partials`: three levels of fixed-order
/// sums, 8 terms each, then 4, with 4 barriers (a binary tree takes 9). Every level reads
/// consecutive words across a warp's lanes, without bank conflicts.
fn reduce_stage_fn(shared_words: u32) -> String {
    const _: () = assert!(abi::WORKGROUP_SIZE == 256 && abi::REDUCE_LANES == 8);
    format!(
        "// This workgroup's sums of words base..base + count of the shared gradient, over its
// 256 lanes in a fixed order.
fn {REDUCE_STAGE_FN}(lid: u32, group: u32, base: u32, count: u32) {{
    workgroupBarrier();
    // Thread (k, s) sums lanes s, s + 32, .., s + 224 of word k into lane s.
    let k = lid / 32u;
    let s = lid % 32u;
    var acc = 0.0f;
    for (var j = 0u; j < 8u; j++) {{
        acc += reduce_stage[k * 256u + s + 32u * j];
    }}
    reduce_stage[k * 256u + s] = acc;
    workgroupBarrier();
    // Thread (k, q) sums lanes q, q + 4, .., q + 28 of word k into lane q.
    if (lid < 32u) {{
        let k2 = lid / 4u;
        let q = lid % 4u;
        var acc2 = 0.0f;
        for (var j = 0u; j < 8u; j++) {{
            acc2 += reduce_stage[k2 * 256u + q + 4u * j];
        }}
        reduce_stage[k2 * 256u + q] = acc2;
    }}
    workgroupBarrier();
    if (lid < count) {{
        let b = lid * 256u;
        shared_partials[group * {shared_words}u + base + lid] = (reduce_stage[b] + reduce_stage[b + 1u]) + (reduce_stage[b + 2u] + reduce_stage[b + 3u]);
    }}
    // The next words' stores wait for these reads.
    workgroupBarrier();
}}
"
    )
}

/// The second pass of the shared-gradient reduction of a function with `shared_words`
/// shared words: one workgroup per word sums the first pass's per-workgroup partials, each
/// thread a fixed stride of them, then a tree; the same order on every run.
pub fn emit_reduce_kernel(signature: &str, shared_words: u32) -> String {
    let wg = abi::WORKGROUP_SIZE;
    format!(
        "// gradfuse reduction (second pass) of the shared gradients of `{signature}`.
// Workgroup w sums word w of every first-pass workgroup's partial sums.

struct Params {{
    n: u32,
}}

@group(0) @binding({pb}) var<uniform> params: Params;
@group(0) @binding({ib}) var<storage, read> partials: array<f32>;
@group(0) @binding({ob}) var<storage, read_write> sums: array<f32>;
var<workgroup> stage: array<f32, {wg}>;

@compute @workgroup_size({wg})
fn reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let word = wid.x;
    var acc = 0.0f;
    for (var g = lid; g < params.n; g += {wg}u) {{
        acc += partials[g * {shared_words}u + word];
    }}
    stage[lid] = acc;
    workgroupBarrier();
    for (var stride = {half}u; stride > 0u; stride = stride / 2u) {{
        if (lid < stride) {{
            stage[lid] += stage[lid + stride];
        }}
        workgroupBarrier();
    }}
    if (lid == 0u) {{
        sums[word] = stage[0];
    }}
}}
",
        pb = abi::REDUCE_PARAMS_BINDING,
        ib = abi::REDUCE_INPUT_BINDING,
        ob = abi::REDUCE_OUTPUT_BINDING,
        half = wg / 2,
    )
}
