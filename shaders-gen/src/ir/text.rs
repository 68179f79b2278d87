//! The IR as text, for reviewing a pass on its own (`insta` snapshots of a function after
//! lowering, AD and optimization) and for reading a failing test.
//!
//! One line per node, `%k = op operands`, with the node's type where it is not `f32` and
//! its source name after `//`; a loop's body is a nested function, indented, reading its
//! own inputs `[i, carried..., captures..., taped...]`.

use super::{Function, LoopKind, Op, Ty};
use std::fmt;

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_function(self, 0, f)
    }
}

fn write_function(func: &Function, depth: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let pad = "    ".repeat(depth);
    writeln!(f, "fn({} inputs) {{", func.num_inputs)?;
    for (i, node) in func.nodes.iter().enumerate() {
        write!(f, "{pad}    %{i}")?;
        match node.ty {
            Ty::F32 => {}
            Ty::Bool => write!(f, ": bool")?,
            Ty::Int => write!(f, ": int")?,
            Ty::Region => write!(f, ": loop")?,
            Ty::Array(n) => write!(f, ": [{n}]")?,
        }
        write!(f, " = ")?;
        write_op(&node.op, depth + 1, f)?;
        match &node.name {
            Some(name) => writeln!(f, "  // {name}")?,
            None => writeln!(f)?,
        }
    }
    let outs: Vec<String> = func.outputs.iter().map(|v| format!("%{}", v.0)).collect();
    writeln!(f, "{pad}    return {}", outs.join(", "))?;
    write!(f, "{pad}}}")
}

fn list(values: &[super::ValueId]) -> String {
    values
        .iter()
        .map(|v| format!("%{}", v.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn write_op(op: &Op, depth: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match op {
        Op::Input(w) => write!(f, "input {w}"),
        Op::Const(c) => write!(f, "const {c:?}"),
        Op::Call(func, args) => write!(f, "{} {}", format!("{func:?}").to_lowercase(), list(args)),
        Op::Cmp(c, a, b) => write!(f, "%{} {} %{}", a.0, c.symbol(), b.0),
        Op::Not(a) => write!(f, "!%{}", a.0),
        Op::And(a, b) => write!(f, "%{} && %{}", a.0, b.0),
        Op::Or(a, b) => write!(f, "%{} || %{}", a.0, b.0),
        Op::Int(k) => write!(f, "int {k}"),
        Op::IntBin(o, a, b) => write!(f, "%{} {} %{}", a.0, o.symbol(), b.0),
        Op::IntToF32(a) => write!(f, "f32 %{}", a.0),
        Op::ArrayNew(elems) if elems.len() > 1 && elems.iter().all(|e| *e == elems[0]) => {
            write!(f, "array [%{}; {}]", elems[0].0, elems.len())
        }
        Op::ArrayNew(elems) => write!(f, "array [{}]", list(elems)),
        Op::ArrayGet { array, index } => write!(f, "%{}[%{}]", array.0, index.0),
        Op::ArraySet {
            array,
            index,
            value,
        } => write!(f, "%{} with [%{}] = %{}", array.0, index.0, value.0),
        Op::ArrayAdd(a, b) => write!(f, "array_add %{}, %{}", a.0, b.0),
        Op::Result(l, k) => write!(f, "result %{}.{k}", l.0),
        Op::CustomGrad {
            value,
            args,
            partials,
        } => write!(
            f,
            "custom_grad %{} in [{}] partials [{}]",
            value.0,
            list(args),
            list(partials)
        ),
        Op::Select {
            cond,
            then,
            otherwise,
        } => write!(f, "select %{} ? %{} : %{}", cond.0, then.0, otherwise.0),
        Op::Loop(l) => {
            let kind = match l.kind {
                LoopKind::Forward => "loop".to_string(),
                LoopKind::Recording => "loop recording".to_string(),
                LoopKind::Reverse { tape, taped } => {
                    format!("loop reversed, reading {taped} taped of %{}", tape.0)
                }
            };
            write!(
                f,
                "{kind} {}..{} carried [{}] captures [{}] ",
                l.start,
                l.end,
                list(&l.init),
                list(&l.captures)
            )?;
            write_function(&l.body, depth, f)
        }
    }
}
