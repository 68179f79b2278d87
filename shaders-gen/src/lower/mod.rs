//! Lowering: a `syn::ItemFn` to the IR, and every "not supported" diagnostic.
//!
//! Errors are collected, not returned at the first: a user sees every unsupported construct
//! of a function in one build. A sub-expression that failed lowers to `None`, and its
//! parents stay silent about it, so one mistake gives one message.

use crate::abi::ArgLayout;
use crate::ir::{Builder, CmpOp, Function, IntOp, Loop, LoopKind, Op, Ty, ValueId};
use crate::ops::{self, Func};
use crate::signature::{Param, Precision, Shape, Signature};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;

mod calls;
mod diagnostics;
mod expr;
mod loops;
mod precision;
mod signature;
mod stmt;
mod syntax;

use diagnostics::Diagnostics;
use signature::{lower_signature, param_type};
use syntax::tuple_parts;

/// A lowered function: its signature and its value as IR over the argument words.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The signature.
    pub sig: Signature,
    /// The argument layout (see [`crate::abi`]).
    pub layout: ArgLayout,
    /// The function's value, one output.
    pub primal: Function,
}

/// A value during lowering.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Scalar(ValueId),
    /// An IR array value ([`crate::ir::Ty::Array`]) and its length.
    Array(ValueId, usize),
    /// A condition: the result of a comparison or of `&& || !`.
    Bool(ValueId),
    /// An integer (a loop index, a literal, `const` or arithmetic on them) and the range of
    /// values it can take, `lo..=hi`, for proving indices in range at compile time.
    Int(ValueId, i64, i64),
}

/// The type of a [`Value`], for messages and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// What arguments and results may be.
    Real(Shape),
    Bool,
    Int,
}

impl Value {
    fn kind(&self) -> Kind {
        match self {
            Value::Scalar(_) => Kind::Real(Shape::Scalar),
            Value::Array(_, n) => Kind::Real(Shape::Array(*n)),
            Value::Bool(_) => Kind::Bool,
            Value::Int(..) => Kind::Int,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Real(shape) => shape.fmt(f),
            Kind::Bool => write!(f, "`bool`"),
            Kind::Int => write!(f, "an integer"),
        }
    }
}

/// What a block or an `if` evaluates to.
enum Tail {
    /// Nothing: the block ends with a statement.
    Unit,
    /// A value.
    Value(Value),
    /// Something in it failed to lower (and was reported).
    Failed,
}

/// A local variable or argument in scope.
struct Var {
    /// Its current value; `None` when it failed to lower (already reported), so that its
    /// uses stay silent.
    value: Option<Value>,
    mutable: bool,
    /// A parameter of the function (made mutable in the signature, not with `let`).
    argument: bool,
    name: String,
}

/// Named constants a body may use, as `std::f32::consts::PI` or `core::f32::consts::PI`.
const CONSTS: &[(&str, f64)] = &[
    ("PI", std::f64::consts::PI),
    ("TAU", std::f64::consts::TAU),
    ("E", std::f64::consts::E),
    ("LN_2", std::f64::consts::LN_2),
    ("LN_10", std::f64::consts::LN_10),
    ("LOG2_E", std::f64::consts::LOG2_E),
    ("LOG10_E", std::f64::consts::LOG10_E),
    ("SQRT_2", std::f64::consts::SQRT_2),
    ("FRAC_1_SQRT_2", std::f64::consts::FRAC_1_SQRT_2),
    ("FRAC_PI_2", std::f64::consts::FRAC_PI_2),
    ("FRAC_PI_3", std::f64::consts::FRAC_PI_3),
    ("FRAC_PI_4", std::f64::consts::FRAC_PI_4),
    ("FRAC_PI_6", std::f64::consts::FRAC_PI_6),
    ("FRAC_1_PI", std::f64::consts::FRAC_1_PI),
    ("FRAC_2_PI", std::f64::consts::FRAC_2_PI),
];

/// What a body may contain, appended to messages about what it may not.
const SUPPORTED: &str = "supported: `let` and `let mut` bindings, assignment and `+= -= *= /=`, \
                         `if`/`else`, comparisons and `&& || !`, `+ - * /`, unary `-`, float \
                         literals, array literals, indexing with integer literals, and f32 \
                         methods";

struct Lowerer {
    b: Builder,
    /// Every variable declared so far, in declaration order.
    vars: Vec<Var>,
    /// Names in scope, innermost block last.
    scopes: Vec<HashMap<String, usize>>,
    diag: Diagnostics,
    /// The declared result, if the return type is one the language has: only then is a
    /// wrong tail worth a message.
    result: Option<Kind>,
    /// A `return` was reported: a missing tail is the same mistake, not a second one.
    saw_return: bool,
    /// The parts of the function's tuple result: a tuple expression of these shapes
    /// lowers to all their words.
    tuple_parts: Option<Vec<Shape>>,
    /// The differentiable functions this one may call.
    library: Vec<syn::ItemFn>,
    /// The functions being lowered, outermost first: a call to one of them is recursion.
    inlining: Vec<String>,
    /// Names whose declaration was an error (an argument, a `let` pattern): a read of one
    /// is not a second error.
    failed_names: std::collections::HashSet<String>,
}

/// Lowers a function, or returns every error found in it.
pub fn lower_fn(item: &syn::ItemFn) -> Result<Lowered, Vec<syn::Error>> {
    lower_fn_with(item, &[])
}

/// The names of the arguments of `item` that are not among the parameters lowered
/// (their declaration was reported).
fn failed_params(item: &syn::Signature, sig: &Signature) -> std::collections::HashSet<String> {
    item.inputs
        .iter()
        .filter_map(|arg| match arg {
            syn::FnArg::Typed(pt) => match &*pt.pat {
                syn::Pat::Ident(p) => Some(p.ident.to_string()),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .filter(|name| !sig.params.iter().any(|p| p.name == name))
        .collect()
}

/// [`lower_fn`] with the sources of the differentiable functions it calls, which are
/// inlined.
pub fn lower_fn_with(
    item: &syn::ItemFn,
    library: &[syn::ItemFn],
) -> Result<Lowered, Vec<syn::Error>> {
    let mut diag = Diagnostics::default();
    let mut sig = lower_signature(&item.sig, &mut diag);
    sig.vis = item.vis.clone();
    sig.precision = precision::precision_of(item, &mut diag);
    let layout = ArgLayout::of(&sig);
    let result = match &item.sig.output {
        syn::ReturnType::Type(_, t) if tuple_parts(t).is_some() => Some(Kind::Real(sig.result)),
        // An unsupported result type was reported with the signature.
        syn::ReturnType::Type(_, t) => param_type(t).ok().map(Kind::Real),
        syn::ReturnType::Default => None,
    };
    let mut l = Lowerer {
        b: Builder::new(layout.words + layout.shared_words),
        vars: Vec::new(),
        scopes: vec![HashMap::new()],
        diag,
        result,
        tuple_parts: sig.result_parts.clone(),
        saw_return: false,
        library: library.to_vec(),
        inlining: vec![item.sig.ident.to_string()],
        failed_names: failed_params(&item.sig, &sig),
    };
    let mut param_values = Vec::new();
    for (p, slot) in sig.params.iter().zip(&layout.slots) {
        let name = p.name.to_string();
        let span = p.name.span();
        let first = layout.first_input(slot);
        let value = match p.kind {
            Shape::Scalar => Value::Scalar(l.b.input(first, span, Some(layout.word_name(first)))),
            Shape::Array(n) => {
                let words = (first..first + n as u32)
                    .map(|w| l.b.input(w, span, Some(layout.word_name(w))))
                    .collect();
                let array = l.b.array(words, span);
                l.b.name(array, &name);
                Value::Array(array, n)
            }
        };
        param_values.push(value.clone());
        l.declare(name, Some(value), p.mutable);
    }
    let result = l.lower_body(&item.block);
    let result = match result {
        Some(out) if out.len() == 1 && crate::compose::custom_grad(item).is_some() => l
            .custom_grad(
                item,
                &sig.params,
                &param_values,
                out[0],
                item.sig.ident.span(),
            )
            .map(|v| vec![v]),
        Some(out) if crate::compose::custom_grad(item).is_some() => {
            l.error(
                item.sig.output.span(),
                "a custom derivative (`grad = ...`) is for functions with an `f32` result",
            );
            Some(out)
        }
        other => other,
    };
    let primal = result.map(|out| l.b.finish(out));
    l.diag.finish(primal).map(|primal| Lowered {
        sig,
        layout,
        primal,
    })
}

impl Lowerer {
    fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.diag.error(span, msg);
    }

    fn declare(&mut self, name: String, value: Option<Value>, mutable: bool) {
        let id = self.vars.len();
        self.vars.push(Var {
            value,
            mutable,
            argument: self.scopes.len() == 1,
            name: name.clone(),
        });
        self.scopes
            .last_mut()
            .expect("there is always a scope")
            .insert(name, id);
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }
}
