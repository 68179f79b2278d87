//! Lowering: a `syn::ItemFn` to the IR, and every "not supported" diagnostic.
//!
//! Errors are collected, not returned at the first: a user sees every unsupported construct
//! of a function in one build. A sub-expression that failed lowers to `None`, and its
//! parents stay silent about it, so one mistake gives one message.

use crate::abi::ArgLayout;
use crate::ir::{Builder, CmpOp, Function, IntOp, Loop, LoopKind, Op, ValueId};
use crate::ops::{self, Func};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;

/// The shape of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `f32`.
    Scalar,
    /// `[f32; N]`.
    Array(usize),
}

/// One parameter of a differentiable function.
#[derive(Clone, Debug)]
pub struct Param {
    /// Its name.
    pub name: syn::Ident,
    /// Its shape.
    pub kind: ParamKind,
    /// Declared `mut x: f32`: the body may assign to it.
    pub mutable: bool,
    /// Marked `#[constant]`: per-element data without a gradient.
    pub constant: bool,
    /// Marked `#[shared]`: one value for the whole batch, its gradient summed over it.
    pub shared: bool,
}

/// What the emitters need to know of the user's signature.
#[derive(Clone, Debug)]
pub struct Signature {
    /// The function's name.
    pub name: syn::Ident,
    /// Its visibility, given to the generated module too.
    pub vis: syn::Visibility,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// Its result: `f32`, or `[f32; M]` (a vector function, with a Jacobian); a tuple
    /// result is `[f32; M]` of all its words, with its parts in `result_parts`.
    pub result: ParamKind,
    /// The parts of a tuple result (`(f32, [f32; 3])`), in order.
    pub result_parts: Option<Vec<ParamKind>>,
}

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

/// A value during lowering: the language's arrays are scalarized here.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Scalar(ValueId),
    Array(Vec<ValueId>),
    /// A condition: the result of a comparison or of `&& || !`.
    Bool(ValueId),
    /// An integer (a loop index, a literal, `const` or arithmetic on them) and the range of
    /// values it can take, `lo..=hi`, for proving indices in range at compile time.
    Int(ValueId, i64, i64),
}

/// The type of a [`Value`], for messages and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    Array(usize),
    Bool,
    Int,
}

impl Value {
    fn shape(&self) -> Shape {
        match self {
            Value::Scalar(_) => Shape::Scalar,
            Value::Array(v) => Shape::Array(v.len()),
            Value::Bool(_) => Shape::Bool,
            Value::Int(..) => Shape::Int,
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Scalar => write!(f, "`f32`"),
            Shape::Array(n) => write!(f, "`[f32; {n}]`"),
            Shape::Bool => write!(f, "`bool`"),
            Shape::Int => write!(f, "an integer"),
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
    errors: Vec<syn::Error>,
    /// The declared result, if the return type is one the language has: only then is a
    /// wrong tail worth a message.
    result: Option<Shape>,
    /// A `return` was reported: a missing tail is the same mistake, not a second one.
    saw_return: bool,
    /// The parts of the function's tuple result: a tuple expression of these shapes
    /// lowers to all their words.
    tuple_parts: Option<Vec<ParamKind>>,
    /// The differentiable functions this one may call.
    library: Vec<syn::ItemFn>,
    /// The functions being lowered, outermost first: a call to one of them is recursion.
    inlining: Vec<String>,
}

/// Lowers a function, or returns every error found in it.
pub fn lower_fn(item: &syn::ItemFn) -> Result<Lowered, Vec<syn::Error>> {
    lower_fn_with(item, &[])
}

/// [`lower_fn`] with the sources of the differentiable functions it calls, which are
/// inlined.
pub fn lower_fn_with(
    item: &syn::ItemFn,
    library: &[syn::ItemFn],
) -> Result<Lowered, Vec<syn::Error>> {
    let mut errors = Vec::new();
    let mut sig = lower_signature(&item.sig, &mut errors);
    sig.vis = item.vis.clone();
    let layout = ArgLayout::of(&sig);
    let result = match &item.sig.output {
        syn::ReturnType::Type(_, t) if tuple_parts(t).is_some() => match sig.result {
            ParamKind::Array(n) => Some(Shape::Array(n)),
            ParamKind::Scalar => Some(Shape::Scalar),
        },
        syn::ReturnType::Type(_, t) => param_type(t, &mut Vec::new()).map(|k| match k {
            ParamKind::Scalar => Shape::Scalar,
            ParamKind::Array(n) => Shape::Array(n),
        }),
        syn::ReturnType::Default => None,
    };
    let mut l = Lowerer {
        b: Builder::new(layout.words + layout.shared_words),
        vars: Vec::new(),
        scopes: vec![HashMap::new()],
        errors,
        result,
        tuple_parts: sig.result_parts.clone(),
        saw_return: false,
        library: library.to_vec(),
        inlining: vec![item.sig.ident.to_string()],
    };
    let mut param_values = Vec::new();
    for (p, slot) in sig.params.iter().zip(&layout.slots) {
        let name = p.name.to_string();
        let span = p.name.span();
        let first = layout.first_input(slot);
        let value = match p.kind {
            ParamKind::Scalar => {
                Value::Scalar(l.b.input(first, span, Some(layout.word_name(first))))
            }
            ParamKind::Array(n) => Value::Array(
                (first..first + n as u32)
                    .map(|w| l.b.input(w, span, Some(layout.word_name(w))))
                    .collect(),
            ),
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
    match (result, l.errors.is_empty()) {
        (Some(out), true) => Ok(Lowered {
            sig,
            layout,
            primal: l.b.finish(out),
        }),
        _ => Err(l.errors),
    }
}

fn err(errors: &mut Vec<syn::Error>, span: Span, msg: impl std::fmt::Display) {
    errors.push(syn::Error::new(span, msg));
}

fn lower_signature(sig: &syn::Signature, errors: &mut Vec<syn::Error>) -> Signature {
    if let Some(t) = &sig.constness {
        err(
            errors,
            t.span,
            "a differentiable function cannot be `const`",
        );
    }
    if let Some(t) = &sig.asyncness {
        err(
            errors,
            t.span,
            "a differentiable function cannot be `async`",
        );
    }
    if let syn::Safety::Unsafe(t) = &sig.safety {
        err(
            errors,
            t.span,
            "a differentiable function cannot be `unsafe`",
        );
    }
    if let Some(abi) = &sig.abi {
        err(
            errors,
            abi.span(),
            "a differentiable function cannot have an `extern` ABI",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        err(
            errors,
            sig.generics.span(),
            "a differentiable function cannot be generic: write it for f32; \
             `f::eval` is the generic version gradfuse generates",
        );
    }
    if let Some(v) = &sig.variadic {
        err(errors, v.span(), "variadic arguments are not supported");
    }
    let mut params = Vec::new();
    for arg in &sig.inputs {
        match arg {
            syn::FnArg::Receiver(r) => err(
                errors,
                r.span(),
                "a differentiable function cannot take `self`: write a free function",
            ),
            syn::FnArg::Typed(pt) => {
                let (mut constant, mut shared) = (false, false);
                for a in &pt.attrs {
                    let path = a.path();
                    let flag = if path.is_ident("constant") {
                        Some(("constant", &mut constant))
                    } else if path.is_ident("shared") {
                        Some(("shared", &mut shared))
                    } else {
                        None
                    };
                    if let Some((name, set)) = flag {
                        if !matches!(a.meta, syn::Meta::Path(_)) {
                            err(errors, a.span(), format!("`#[{name}]` takes no arguments"));
                        } else if *set {
                            err(errors, a.span(), format!("`#[{name}]` is given twice"));
                        }
                        *set = true;
                    } else if ["allow", "warn", "deny", "forbid", "expect"]
                        .iter()
                        .any(|lint| path.is_ident(lint))
                    {
                        // Lint levels mean nothing to gradfuse; rustc sees them.
                    } else {
                        err(
                            errors,
                            a.span(),
                            "unsupported argument attribute: an argument may be marked \
                             `#[constant]` (per-element data without a gradient) or \
                             `#[shared]` (one value for the whole batch, its gradient summed)",
                        );
                    }
                }
                if constant
                    && shared
                    && let Some(a) = pt.attrs.iter().find(|a| a.path().is_ident("shared"))
                {
                    err(
                        errors,
                        a.span(),
                        "an argument cannot be both `#[shared]` and `#[constant]` yet: a \
                         shared argument has a gradient (summed over the batch)",
                    );
                }
                let mut mutable = false;
                let name = match &*pt.pat {
                    syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        mutable = pi.mutability.is_some();
                        Some(pi.ident.clone())
                    }
                    other => {
                        err(
                            errors,
                            other.span(),
                            "argument patterns are not supported: name the argument \
                             (`x: f32`)",
                        );
                        None
                    }
                };
                let kind = param_type(&pt.ty, errors);
                if let (Some(name), Some(kind)) = (name, kind) {
                    params.push(Param {
                        name,
                        kind,
                        mutable,
                        constant,
                        shared,
                    });
                }
            }
        }
    }
    if !params.is_empty() && params.iter().all(|p| p.constant) {
        err(
            errors,
            sig.inputs.span(),
            "every argument is `#[constant]`: there is nothing to differentiate",
        );
    }
    if !params.is_empty() && params.iter().all(|p| p.shared) {
        err(
            errors,
            sig.inputs.span(),
            "every argument is `#[shared]`: a batch needs at least one per-element argument",
        );
    }
    let mut result = ParamKind::Scalar;
    let mut result_parts = None;
    match &sig.output {
        syn::ReturnType::Default => err(
            errors,
            sig.ident.span(),
            "a differentiable function must return `f32`: add `-> f32`",
        ),
        syn::ReturnType::Type(_, ty) if tuple_parts(ty).is_some() => {
            let parts = tuple_parts(ty).unwrap_or_default();
            let words = parts
                .iter()
                .map(|p| match p {
                    ParamKind::Scalar => 1,
                    ParamKind::Array(n) => *n,
                })
                .sum();
            result = ParamKind::Array(words);
            result_parts = Some(parts);
        }
        syn::ReturnType::Type(_, ty) => {
            let mut ignored = Vec::new();
            match param_type(ty, &mut ignored) {
                Some(kind) => result = kind,
                None => err(
                    errors,
                    ty.span(),
                    format!(
                        "a differentiable function returns `f32`, `[f32; M]` or a tuple of \
                         those (found `{}`)",
                        quote::quote!(#ty)
                    ),
                ),
            }
        }
    }
    if let (ParamKind::Array(_), Some(p)) = (result, params.iter().find(|p| p.shared)) {
        err(
            errors,
            p.name.span(),
            "`#[shared]` arguments need an `f32` result (their gradient is that of the sum \
             over the batch); with an array result, pass them per element",
        );
    }
    Signature {
        result,
        result_parts,
        name: sig.ident.clone(),
        vis: syn::Visibility::Inherited,
        params,
    }
}

fn is_f32(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p.qself.is_none() && p.path.is_ident("f32"),
        syn::Type::Paren(p) => is_f32(&p.elem),
        syn::Type::Group(g) => is_f32(&g.elem),
        _ => false,
    }
}

/// The shape of an argument type, or an error saying what is supported.
fn param_type(ty: &syn::Type, errors: &mut Vec<syn::Error>) -> Option<ParamKind> {
    // A type passed through a `macro_rules!` `$t:ty` arrives in an invisible group.
    if let syn::Type::Group(g) = ty {
        return param_type(&g.elem, errors);
    }
    if let syn::Type::Paren(p) = ty {
        return param_type(&p.elem, errors);
    }
    if is_f32(ty) {
        return Some(ParamKind::Scalar);
    }
    match ty {
        syn::Type::Array(arr) => {
            if !is_f32(&arr.elem) {
                err(
                    errors,
                    arr.elem.span(),
                    "array arguments must be `[f32; N]`: nested arrays and other element \
                     types are not supported",
                );
                return None;
            }
            let n = array_len(&arr.len, errors)?;
            Some(ParamKind::Array(n))
        }
        syn::Type::Reference(r) => {
            err(
                errors,
                r.span(),
                "references are not supported: take the argument by value (`x: f32` or \
                 `p: [f32; N]`)",
            );
            None
        }
        other => {
            err(
                errors,
                other.span(),
                format!(
                    "unsupported argument type `{}`: arguments are `f32` or `[f32; N]`",
                    quote::quote!(#other)
                ),
            );
            None
        }
    }
}

fn array_len(len: &syn::Expr, errors: &mut Vec<syn::Error>) -> Option<usize> {
    match len {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => match i.base10_parse::<usize>() {
            Ok(0) => {
                err(errors, i.span(), "arrays must have at least one element");
                None
            }
            Ok(n) => Some(n),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        other => {
            err(
                errors,
                other.span(),
                "array lengths must be integer literals (`[f32; 3]`)",
            );
            None
        }
    }
}

impl Lowerer {
    fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        err(&mut self.errors, span, msg);
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

    fn lower_body(&mut self, block: &syn::Block) -> Option<Vec<ValueId>> {
        // The body is a scope of its own: scope 0 holds the arguments.
        let tail = self.lower_block(block);
        match (tail, self.result) {
            (Tail::Value(Value::Scalar(v)), Some(Shape::Scalar)) => Some(vec![v]),
            (Tail::Value(Value::Array(vs)), Some(Shape::Array(m))) if vs.len() == m => Some(vs),
            (Tail::Failed, _) => None,
            (Tail::Unit, expected) => {
                if let (Some(expected), false) = (expected, self.saw_return) {
                    let span = block.brace_token.span.close();
                    self.error(
                        span,
                        format!("the body must end with the result: {expected} without a `;`"),
                    );
                }
                None
            }
            (Tail::Value(v), expected) => {
                if let Some(expected) = expected {
                    let span = block
                        .stmts
                        .last()
                        .map_or(block.brace_token.span.close(), |s| s.span());
                    self.error(
                        span,
                        format!("the result must be {expected}, found {}", v.shape()),
                    );
                }
                None
            }
        }
    }

    /// A `{ ... }` block in its own scope: names it declares end with it, assignments to
    /// variables from outside stay.
    fn lower_block(&mut self, block: &syn::Block) -> Tail {
        self.scopes.push(HashMap::new());
        let tail = self.lower_stmts(&block.stmts);
        self.scopes.pop();
        tail
    }

    fn lower_stmts(&mut self, stmts: &[syn::Stmt]) -> Tail {
        let n = stmts.len();
        for (i, stmt) in stmts.iter().enumerate() {
            let last = i + 1 == n;
            match stmt {
                syn::Stmt::Local(local) => self.lower_let(local),
                syn::Stmt::Expr(e, None) if last => return self.lower_tail(e),
                syn::Stmt::Expr(e, semi) => self.lower_statement(e, semi.is_some()),
                syn::Stmt::Item(syn::Item::Const(c)) => self.lower_const(c),
                syn::Stmt::Item(item) => self.error(
                    item.span(),
                    "items (functions, structs, uses, ...) inside a differentiable body are \
                     not supported: define them outside",
                ),
                syn::Stmt::Macro(m) => self.error(
                    m.mac.path.span(),
                    "macros are not supported inside a differentiable body",
                ),
            }
        }
        Tail::Unit
    }

    /// The last line of a block, without `;`: a value, or a statement that has none.
    fn lower_tail(&mut self, e: &syn::Expr) -> Tail {
        match e {
            syn::Expr::If(i) => self.lower_if(i),
            syn::Expr::Block(b) if b.label.is_none() => self.lower_block(&b.block),
            syn::Expr::Assign(_) => {
                self.lower_statement(e, false);
                Tail::Unit
            }
            syn::Expr::Binary(b) if is_compound_assign(&b.op) => {
                self.lower_statement(e, false);
                Tail::Unit
            }
            syn::Expr::ForLoop(f) => {
                self.lower_for(f);
                Tail::Unit
            }
            _ => match self.lower_expr(e) {
                Some(v) => Tail::Value(v),
                None => Tail::Failed,
            },
        }
    }

    fn lower_statement(&mut self, e: &syn::Expr, _semi: bool) {
        match e {
            syn::Expr::Assign(a) => self.lower_assign(&a.left, &a.right, None, a.eq_token.span),
            syn::Expr::Binary(b) if is_compound_assign(&b.op) => {
                use syn::BinOp as B;
                let func = match b.op {
                    B::AddAssign(_) => Func::Add,
                    B::SubAssign(_) => Func::Sub,
                    B::MulAssign(_) => Func::Mul,
                    B::DivAssign(_) => Func::Div,
                    op => {
                        self.error(
                            op.span(),
                            "only `+= -= *= /=` are supported among compound assignments",
                        );
                        return;
                    }
                };
                self.lower_assign(&b.left, &b.right, Some(func), b.op.span());
            }
            syn::Expr::If(i) => {
                let tail = self.lower_if(i);
                self.statement_value(e, tail)
            }
            syn::Expr::Block(b) if b.label.is_none() => {
                let tail = self.lower_block(&b.block);
                self.statement_value(e, tail)
            }
            syn::Expr::ForLoop(f) => self.lower_for(f),
            _ => {
                // Lower it for its own diagnostics; a supported expression here is useless.
                if self.lower_expr(e).is_some() {
                    self.useless_value(e);
                }
            }
        }
    }

    fn statement_value(&mut self, e: &syn::Expr, tail: Tail) {
        if let Tail::Value(_) = tail {
            self.useless_value(e);
        }
    }

    fn useless_value(&mut self, e: &syn::Expr) {
        self.error(
            e.span(),
            "this value is not used: bind it with `let`, assign it, or make it the final \
             expression (without `;`)",
        );
    }

    /// `if`/`else`: both branches are lowered, and every variable they assign, and the
    /// value, becomes a select on the condition.
    fn lower_if(&mut self, i: &syn::ExprIf) -> Tail {
        let span = i.if_token.span;
        let cond = self.boolean(&i.cond);
        let before: Vec<Option<Value>> = self.vars.iter().map(|v| v.value.clone()).collect();
        let then_tail = self.lower_block(&i.then_branch);
        let then_vals: Vec<Option<Value>> = self.vars[..before.len()]
            .iter()
            .map(|v| v.value.clone())
            .collect();
        self.vars.truncate(before.len());
        for (var, v) in self.vars.iter_mut().zip(&before) {
            var.value = v.clone();
        }
        let else_tail = match &i.else_branch {
            None => Tail::Unit,
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => self.lower_if(inner),
                syn::Expr::Block(b) => self.lower_block(&b.block),
                other => self.lower_tail(other),
            },
        };
        self.vars.truncate(before.len());
        for (k, then_val) in then_vals.into_iter().enumerate() {
            if then_val == self.vars[k].value {
                continue;
            }
            let merged = match (cond, then_val, self.vars[k].value.take()) {
                (Some(c), Some(t), Some(e)) => self.merge(c, t, e, span),
                _ => None,
            };
            if let Some(v) = &merged {
                let name = self.vars[k].name.clone();
                self.name_value(v, &name);
            }
            self.vars[k].value = merged;
        }
        match (then_tail, else_tail) {
            (Tail::Failed, _) | (_, Tail::Failed) => Tail::Failed,
            (Tail::Unit, Tail::Unit) => Tail::Unit,
            (Tail::Value(t), Tail::Value(e)) => {
                if t.shape() != e.shape() {
                    self.error(
                        span,
                        format!(
                            "the branches of this `if` have different types: {} and {}",
                            t.shape(),
                            e.shape()
                        ),
                    );
                    return Tail::Failed;
                }
                match cond.and_then(|c| self.merge(c, t, e, span)) {
                    Some(v) => Tail::Value(v),
                    None => Tail::Failed,
                }
            }
            (Tail::Value(_), Tail::Unit) if i.else_branch.is_none() => {
                self.error(
                    i.then_branch.span(),
                    "an `if` without `else` has no value: add an `else` branch, or end this \
                     branch with a statement (`;`)",
                );
                Tail::Failed
            }
            (t, _) => {
                let (with, without) = if matches!(t, Tail::Value(_)) {
                    ("the first", "the other")
                } else {
                    ("the other", "the first")
                };
                self.error(
                    span,
                    format!(
                        "{with} branch of this `if` has a value and {without} does not: end \
                         both with a value, or both with a statement (`;`)"
                    ),
                );
                Tail::Failed
            }
        }
    }

    /// `if c { t } else { e }` of two values of the same shape.
    fn merge(&mut self, c: ValueId, t: Value, e: Value, span: Span) -> Option<Value> {
        Some(match (t, e) {
            (Value::Scalar(t), Value::Scalar(e)) => Value::Scalar(self.b.select(c, t, e, span)),
            (Value::Bool(t), Value::Bool(e)) => Value::Bool(self.b.select(c, t, e, span)),
            (Value::Array(t), Value::Array(e)) if t.len() == e.len() => Value::Array(
                t.iter()
                    .zip(&e)
                    .map(|(t, e)| self.b.select(c, *t, *e, span))
                    .collect(),
            ),
            // Assignments keep a variable's shape, so branches cannot disagree on it.
            _ => return None,
        })
    }

    fn name_value(&mut self, v: &Value, name: &str) {
        match v {
            Value::Scalar(v) | Value::Bool(v) | Value::Int(v, ..) => self.b.name(*v, name),
            Value::Array(vs) => {
                for (j, v) in vs.iter().enumerate() {
                    self.b.name(*v, &format!("{name}_{j}"));
                }
            }
        }
    }

    /// `target = rhs` or, with `op`, `target op= rhs`; `target` is a variable or an
    /// element of an array variable with a literal index.
    fn lower_assign(&mut self, target: &syn::Expr, rhs: &syn::Expr, op: Option<Func>, span: Span) {
        let (var_expr, index) = match target {
            syn::Expr::Index(ix) => (&*ix.expr, Some(&*ix.index)),
            other => (other, None),
        };
        let var = match var_expr {
            syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                let name = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                match self.lookup(&name) {
                    Some(id) => Some(id),
                    None => {
                        self.error(p.span(), format!("cannot find `{name}` here"));
                        None
                    }
                }
            }
            other => {
                self.error(
                    other.span(),
                    "only a variable (`x = ...`) or an element of an array variable \
                     (`a[0] = ...`) can be assigned",
                );
                None
            }
        };
        let index = index.and_then(|e| self.index_value(e).map(|k| (k, e)));
        let value = self.lower_expr(rhs);
        let Some(var) = var else { return };
        if !self.vars[var].mutable {
            let name = self.vars[var].name.clone();
            let fix = if self.vars[var].argument {
                format!("declare the argument `mut {name}` in the signature")
            } else {
                format!("declare it `let mut {name}`")
            };
            self.error(
                var_expr.span(),
                format!("cannot assign to `{name}`: it is not mutable ({fix})"),
            );
            return;
        }
        if target_has_index(target) && index.is_none() {
            return;
        }
        let (Some(current), Some(value)) = (self.vars[var].value.clone(), value) else {
            // Something already failed: keep quiet and make later uses quiet too.
            self.vars[var].value = None;
            return;
        };
        let name = self.vars[var].name.clone();
        let new = match (index, current) {
            (None, current) => match (op, &current, &value) {
                (None, c, v) if c.shape() == v.shape() => value,
                (None, c, v) => {
                    self.error(
                        rhs.span(),
                        format!(
                            "type mismatch: `{name}` is {} but the value is {}",
                            c.shape(),
                            v.shape()
                        ),
                    );
                    return;
                }
                (Some(f), Value::Scalar(c), Value::Scalar(v)) => {
                    Value::Scalar(self.b.call(f, vec![*c, *v], span))
                }
                (Some(_), c, v) => {
                    self.error(
                        span,
                        format!(
                            "compound assignment needs two `f32` values, found {} and {}; \
                             for arrays, assign each element (`a[0] += ...`)",
                            c.shape(),
                            v.shape()
                        ),
                    );
                    return;
                }
            },
            (Some((k, kexpr)), Value::Array(mut elems)) => {
                let Value::Scalar(v) = value else {
                    self.error(
                        rhs.span(),
                        format!(
                            "an array element is an `f32`, but the value is {}",
                            value.shape()
                        ),
                    );
                    return;
                };
                let Some(k) = self.check_index(kexpr, k, elems.len()) else {
                    return;
                };
                match k {
                    Index::Const(k) => {
                        let slot = &mut elems[k];
                        *slot = match op {
                            None => v,
                            Some(f) => self.b.call(f, vec![*slot, v], span),
                        };
                    }
                    Index::Dynamic(idx) => {
                        // Every element becomes `if idx == k { new } else { old }`.
                        let new = match op {
                            None => v,
                            Some(f) => {
                                let old = self.b.push(
                                    Op::Index {
                                        elems: elems.clone(),
                                        index: idx,
                                    },
                                    span,
                                    None,
                                );
                                self.b.call(f, vec![old, v], span)
                            }
                        };
                        for (k, slot) in elems.iter_mut().enumerate() {
                            let kk = self.b.int(k as i64, span);
                            let hit = self.b.cmp(CmpOp::Eq, idx, kk, span);
                            *slot = self.b.select(hit, new, *slot, span);
                        }
                    }
                }
                Value::Array(elems)
            }
            (Some(_), other) => {
                self.error(
                    var_expr.span(),
                    format!("only arrays can be indexed; `{name}` is {}", other.shape()),
                );
                return;
            }
        };
        self.name_value(&new, &name);
        self.vars[var].value = Some(new);
    }

    fn lower_let(&mut self, local: &syn::Local) {
        let (pat, ty) = match &local.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        let (name, mutable) = match pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (Some(pi.ident.to_string()), pi.mutability.is_some())
            }
            syn::Pat::Wild(_) => (None, false),
            other => {
                self.error(
                    other.span(),
                    "only simple `let name = ...;` bindings are supported (no tuple or \
                     struct patterns)",
                );
                (None, false)
            }
        };
        let expected = ty.and_then(|t| self.binding_type(t));
        let Some(init) = &local.init else {
            self.error(
                local.span(),
                "a `let` needs a value: `let name = expression;`",
            );
            return;
        };
        if let Some((else_tok, _)) = &init.diverge {
            self.error(else_tok.span, "`let ... else` is not supported");
        }
        let value = self.lower_expr(&init.expr);
        if let (Some(expected), Some(v)) = (expected, &value)
            && v.shape() != expected
        {
            self.error(
                init.expr.span(),
                format!(
                    "type mismatch: the binding is declared {expected} but the value is {}",
                    v.shape()
                ),
            );
            if let Some(name) = name {
                self.declare(name, None, mutable);
            }
            return;
        }
        if let Some(name) = name {
            if let Some(v) = &value {
                self.name_value(v, &name);
            }
            self.declare(name, value, mutable);
        }
    }

    /// The declared type of a `let`: what arguments may be, or `bool`.
    fn binding_type(&mut self, ty: &syn::Type) -> Option<Shape> {
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && p.path.is_ident("bool")
        {
            return Some(Shape::Bool);
        }
        param_type(ty, &mut self.errors).map(|k| match k {
            ParamKind::Scalar => Shape::Scalar,
            ParamKind::Array(n) => Shape::Array(n),
        })
    }

    fn scalar(&mut self, e: &syn::Expr) -> Option<ValueId> {
        match self.lower_expr(e)? {
            Value::Scalar(v) => Some(v),
            Value::Array(_) => {
                self.error(
                    e.span(),
                    "expected an `f32`, found an array: index it (`p[0]`); arithmetic on \
                     whole arrays is not supported",
                );
                None
            }
            Value::Bool(_) => {
                self.error(
                    e.span(),
                    "expected an `f32`, found a condition (`bool`): use it in an `if` \
                     (`if c { 1.0 } else { 0.0 }`)",
                );
                None
            }
            Value::Int(..) => {
                let msg = match e {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => format!(
                        "integer literal where an `f32` is expected: write `{}.0`",
                        i.base10_digits()
                    ),
                    _ => "expected an `f32`, found an integer (a loop index): convert it with \
                          `as f32`"
                        .to_string(),
                };
                self.error(e.span(), msg);
                None
            }
        }
    }

    /// An integer expression: a loop index, a literal, a `const`, or `+ - *` of those.
    fn integer(&mut self, e: &syn::Expr) -> Option<(ValueId, i64, i64)> {
        self.integer_for(
            e,
            "expected an integer (a loop index, an integer literal or a `const`)",
        )
    }

    /// [`Self::integer`], with `what` saying what was expected where it is not one.
    fn integer_for(&mut self, e: &syn::Expr, what: &str) -> Option<(ValueId, i64, i64)> {
        match self.lower_expr(e)? {
            Value::Int(v, lo, hi) => Some((v, lo, hi)),
            other => {
                self.error(e.span(), format!("{what}, found {}", other.shape()));
                None
            }
        }
    }

    /// An integer known at compile time.
    fn constant_integer(&mut self, e: &syn::Expr, what: &str) -> Option<i64> {
        let (_, lo, hi) = self.integer(e)?;
        if lo != hi {
            self.error(
                e.span(),
                format!("{what} must be known at compile time: an integer literal or a `const`"),
            );
            return None;
        }
        Some(lo)
    }

    fn boolean(&mut self, e: &syn::Expr) -> Option<ValueId> {
        match self.lower_expr(e)? {
            Value::Bool(v) => Some(v),
            other => {
                self.error(
                    e.span(),
                    format!(
                        "expected a condition (`bool`), found {}: compare it (`x > 0.0`)",
                        other.shape()
                    ),
                );
                None
            }
        }
    }

    fn lower_expr(&mut self, e: &syn::Expr) -> Option<Value> {
        use syn::Expr as E;
        let span = e.span();
        match e {
            E::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => match i.base10_parse::<i64>() {
                Ok(v) if matches!(i.suffix(), "" | "usize" | "i32" | "u32" | "i64" | "isize") => {
                    Some(Value::Int(self.b.int(v, i.span()), v, v))
                }
                Ok(_) => {
                    self.error(i.span(), "unsupported integer literal suffix");
                    None
                }
                Err(e) => {
                    self.errors.push(e);
                    None
                }
            },
            E::Lit(lit) => self.lower_lit(&lit.lit).map(Value::Scalar),
            E::Paren(p) => self.lower_expr(&p.expr),
            E::Group(g) => self.lower_expr(&g.expr),
            E::Unary(u) => match u.op {
                syn::UnOp::Neg(_) => {
                    let a = self.scalar(&u.expr)?;
                    Some(Value::Scalar(self.b.call(Func::Neg, vec![a], span)))
                }
                syn::UnOp::Not(_) => {
                    let a = self.boolean(&u.expr)?;
                    Some(Value::Bool(self.b.not(a, span)))
                }
                _ => {
                    self.error(
                        span,
                        "dereference is not supported: the language has no references",
                    );
                    None
                }
            },
            E::Binary(bin) => self.lower_binary(bin),
            E::Path(p) => self.lower_path(p),
            E::Index(ix) => self.lower_index(ix),
            E::Array(arr) => {
                let mut elems = Vec::new();
                let mut ok = true;
                for el in &arr.elems {
                    match self.scalar(el) {
                        Some(v) => elems.push(v),
                        None => ok = false,
                    }
                }
                if arr.elems.is_empty() {
                    self.error(span, "empty arrays are not supported");
                    return None;
                }
                ok.then_some(Value::Array(elems))
            }
            E::Repeat(r) => {
                let v = self.scalar(&r.expr);
                let n = array_len(&r.len, &mut self.errors)?;
                Some(Value::Array(vec![v?; n]))
            }
            E::MethodCall(mc) => self.lower_method(mc),
            E::Call(call) => self.lower_call(call),
            E::Cast(c) => {
                let to_f32 = is_f32(&c.ty);
                match self.lower_expr(&c.expr)? {
                    Value::Int(v, ..) if to_f32 => {
                        Some(Value::Scalar(self.b.push(Op::IntToF32(v), span, None)))
                    }
                    Value::Int(..) => {
                        self.error(
                            c.ty.span(),
                            "an integer converts to `f32` only (`i as f32`)",
                        );
                        None
                    }
                    _ => {
                        self.error(
                            c.as_token.span,
                            "only an integer (a loop index) converts, and only to `f32` \
                             (`i as f32`): this value is already an `f32`, and array indices \
                             are integers computed from loop indices",
                        );
                        None
                    }
                }
            }
            E::If(i) => match self.lower_if(i) {
                Tail::Value(v) => Some(v),
                Tail::Failed => None,
                Tail::Unit => {
                    self.error(
                        i.if_token.span,
                        "this `if` has no value where one is needed: give it an `else` and \
                         end both branches with a value (without `;`)",
                    );
                    None
                }
            },
            E::ForLoop(f) => {
                self.lower_for(f);
                self.error(
                    f.for_token.span,
                    "a `for` loop has no value: write it as a statement",
                );
                None
            }
            E::Break(b) => {
                self.error(
                    b.break_token.span,
                    "`break` is not supported: loops run their full range (`for i in A..B`)",
                );
                None
            }
            E::Continue(c) => {
                self.error(
                    c.continue_token.span,
                    "`continue` is not supported: wrap the rest of the body in an `if`",
                );
                None
            }
            E::While(w) => {
                self.error(w.while_token.span, "`while` loops are not supported");
                None
            }
            E::Loop(l) => {
                self.error(l.loop_token.span, "`loop` is not supported");
                None
            }
            E::Match(m) => {
                self.error(m.match_token.span, "`match` is not supported");
                None
            }
            E::Closure(c) => {
                self.error(
                    c.inputs_begin.span,
                    "closures are not supported: write a separate #[differentiable] function",
                );
                None
            }
            E::Reference(r) => {
                self.error(
                    r.and_token.span,
                    "references are not supported: the language works with values",
                );
                None
            }
            E::Field(f) => {
                self.error(
                    f.dot_token.span,
                    "field access is not supported: structs and tuples are not part of the \
                     language",
                );
                None
            }
            E::Tuple(t) => {
                let Some(parts) = self.tuple_parts.clone() else {
                    self.error(
                        span,
                        "tuples are supported only as the result of a function returning one",
                    );
                    return None;
                };
                if t.elems.len() != parts.len() {
                    self.error(
                        span,
                        format!(
                            "the result is a tuple of {} parts, found {}",
                            parts.len(),
                            t.elems.len()
                        ),
                    );
                    return None;
                }
                let mut words = Vec::new();
                let mut ok = true;
                for (e, p) in t.elems.iter().zip(&parts) {
                    match (self.lower_expr(e), p) {
                        (Some(Value::Scalar(v)), ParamKind::Scalar) => words.push(v),
                        (Some(Value::Array(vs)), ParamKind::Array(n)) if vs.len() == *n => {
                            words.extend(vs)
                        }
                        (Some(v), p) => {
                            let want = match p {
                                ParamKind::Scalar => Shape::Scalar,
                                ParamKind::Array(n) => Shape::Array(*n),
                            };
                            self.error(
                                e.span(),
                                format!(
                                    "this part of the result must be {want}, found {}",
                                    v.shape()
                                ),
                            );
                            ok = false;
                        }
                        (None, _) => ok = false,
                    }
                }
                ok.then_some(Value::Array(words))
            }
            E::Macro(m) => {
                self.error(
                    m.mac.path.span(),
                    "macros are not supported inside a differentiable body",
                );
                None
            }
            E::Unsafe(u) => {
                self.error(
                    u.unsafe_token.span,
                    "`unsafe` is not allowed in a differentiable function",
                );
                None
            }
            E::Block(b) if b.label.is_none() => match self.lower_block(&b.block) {
                Tail::Value(v) => Some(v),
                Tail::Failed => None,
                Tail::Unit => {
                    self.error(
                        span,
                        "this block has no value where one is needed: end it with a value \
                         (without `;`)",
                    );
                    None
                }
            },
            E::Return(r) => {
                self.saw_return = true;
                self.error(
                    r.return_token.span,
                    "`return` is not supported: end the body with the result expression",
                );
                None
            }
            E::Assign(_) => {
                self.error(
                    span,
                    "an assignment has no value: write it as a statement (`x = ...;`)",
                );
                None
            }
            _ => {
                self.error(
                    span,
                    format!("this expression is not supported; {SUPPORTED}"),
                );
                None
            }
        }
    }

    fn lower_lit(&mut self, lit: &syn::Lit) -> Option<ValueId> {
        match lit {
            syn::Lit::Float(f) => {
                if !matches!(f.suffix(), "" | "f32") {
                    self.error(
                        f.span(),
                        format!(
                            "`{}` literals are not supported: the language is f32 (write `1.0` \
                             or `1.0f32`)",
                            f.suffix()
                        ),
                    );
                    return None;
                }
                // The exact decimal value, so the f64 interpreter sees the number the user
                // wrote; f32 code rounds it the way rustc does.
                match f.base10_digits().parse::<f64>() {
                    Ok(v) => Some(self.b.constant(v, f.span())),
                    Err(e) => {
                        self.error(f.span(), format!("invalid float literal: {e}"));
                        None
                    }
                }
            }
            syn::Lit::Int(i) => {
                self.error(
                    i.span(),
                    format!(
                        "integer literal where an `f32` is expected: write `{}.0`",
                        i.base10_digits()
                    ),
                );
                None
            }
            syn::Lit::Bool(b) => {
                self.error(
                    b.span,
                    "`true`/`false` literals are not supported: write the condition itself \
                     (`x > 0.0`)",
                );
                None
            }
            other => {
                self.error(
                    other.span(),
                    "only float literals are supported in arithmetic",
                );
                None
            }
        }
    }

    fn lower_binary(&mut self, bin: &syn::ExprBinary) -> Option<Value> {
        use syn::BinOp as B;
        if is_integer_expr(&bin.left) || is_integer_expr(&bin.right) {
            // Integer arithmetic on indices, or a comparison of them.
            if let Some(v) = self.lower_int_binary(bin) {
                return v;
            }
        }
        let func = match bin.op {
            B::Add(_) => Func::Add,
            B::Sub(_) => Func::Sub,
            B::Mul(_) => Func::Mul,
            B::Div(_) => Func::Div,
            op if is_compound_assign(&op) => {
                self.error(
                    op.span(),
                    "a compound assignment has no value: write it as a statement \
                     (`x += ...;`)",
                );
                return None;
            }
            B::Rem(t) => {
                self.error(
                    t.span,
                    "`%` is not supported; use `x - (x / m).floor() * m`",
                );
                return None;
            }
            B::Lt(_) | B::Le(_) | B::Gt(_) | B::Ge(_) | B::Eq(_) | B::Ne(_) => {
                let cmp = match bin.op {
                    B::Lt(_) => CmpOp::Lt,
                    B::Le(_) => CmpOp::Le,
                    B::Gt(_) => CmpOp::Gt,
                    B::Ge(_) => CmpOp::Ge,
                    B::Eq(_) => CmpOp::Eq,
                    _ => CmpOp::Ne,
                };
                let a = self.lower_expr(&bin.left);
                let b = self.lower_expr(&bin.right);
                let span = bin.op.span();
                return match (a?, b?) {
                    (Value::Int(a, ..), Value::Int(b, ..)) => {
                        Some(Value::Bool(self.b.cmp(cmp, a, b, span)))
                    }
                    (Value::Scalar(a), Value::Scalar(b)) => {
                        Some(Value::Bool(self.b.cmp(cmp, a, b, span)))
                    }
                    (a, b) => {
                        self.error(
                            span,
                            format!(
                                "comparisons take two `f32` values or two integers, found {} \
                                 and {}",
                                a.shape(),
                                b.shape()
                            ),
                        );
                        None
                    }
                };
            }
            B::And(_) | B::Or(_) => {
                let a = self.boolean(&bin.left);
                let b = self.boolean(&bin.right);
                let (a, b) = (a?, b?);
                let span = bin.op.span();
                return Some(Value::Bool(if matches!(bin.op, B::And(_)) {
                    self.b.and(a, b, span)
                } else {
                    self.b.or(a, b, span)
                }));
            }
            op => {
                self.error(
                    op.span(),
                    "bitwise and shift operators are not supported: the language is f32 \
                     arithmetic",
                );
                return None;
            }
        };
        let a = self.scalar(&bin.left);
        let b = self.scalar(&bin.right);
        Some(Value::Scalar(self.b.call(
            func,
            vec![a?, b?],
            bin.op.span(),
        )))
    }

    fn lower_path(&mut self, p: &syn::ExprPath) -> Option<Value> {
        let span = p.span();
        if p.qself.is_none()
            && let Some(ident) = p.path.get_ident()
        {
            let name = ident.to_string();
            if let Some(id) = self.lookup(&name) {
                return self.vars[id].value.clone();
            }
            self.error(
                span,
                format!(
                    "cannot find `{name}` here: a differentiable body sees its arguments and \
                     its own `let` bindings (and `std::f32::consts`)"
                ),
            );
            return None;
        }
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let last = segs.last().cloned().unwrap_or_default();
        let prefix: Vec<&str> = segs[..segs.len().saturating_sub(1)]
            .iter()
            .map(String::as_str)
            .collect();
        let is_consts = matches!(
            prefix.as_slice(),
            ["std", "f32", "consts"] | ["core", "f32", "consts"]
        );
        if is_consts && let Some((_, v)) = CONSTS.iter().find(|(n, _)| *n == last) {
            return Some(Value::Scalar(self.b.constant(*v, span)));
        }
        self.error(
            span,
            "paths other than local names and `std::f32::consts::*` are not supported; \
             constants and statics from outside the function cannot be differentiated \
             through: pass them as arguments",
        );
        None
    }

    fn lower_index(&mut self, ix: &syn::ExprIndex) -> Option<Value> {
        let base = self.lower_expr(&ix.expr);
        let index = self.index_value(&ix.index);
        let (base, index) = (base?, index?);
        let Value::Array(elems) = base else {
            self.error(
                ix.expr.span(),
                format!("only arrays can be indexed; this is {}", base.shape()),
            );
            return None;
        };
        let index = self.check_index(&ix.index, index, elems.len())?;
        Some(Value::Scalar(match index {
            Index::Const(k) => elems[k],
            Index::Dynamic(v) => self.b.push(Op::Index { elems, index: v }, ix.span(), None),
        }))
    }

    /// An array index: an integer expression.
    fn index_value(&mut self, e: &syn::Expr) -> Option<(ValueId, i64, i64)> {
        self.integer_for(
            e,
            "array indices are integers (a literal, a `const`, a loop index, or `+ - *` of \
             those)",
        )
    }

    /// An index proven in range for an array of `len`, or an error saying which values
    /// fall outside: out-of-range indices never reach the GPU.
    fn check_index(
        &mut self,
        e: &syn::Expr,
        (v, lo, hi): (ValueId, i64, i64),
        len: usize,
    ) -> Option<Index> {
        let len = len as i64;
        if lo == hi && (0..len).contains(&lo) {
            return Some(Index::Const(lo as usize));
        }
        if lo == hi {
            self.error(
                e.span(),
                format!("index {lo} is out of range for an array of length {len}"),
            );
            return None;
        }
        if lo < 0 || hi >= len {
            self.error(
                e.span(),
                format!(
                    "this index takes the values {lo}..={hi}, out of range for an array of \
                     length {len}: gradfuse proves indices in range at compile time"
                ),
            );
            return None;
        }
        Some(Index::Dynamic(v))
    }

    /// `+ - *` of two integers, or a comparison; `None` if an operand is not an integer
    /// (the caller reports it as f32 arithmetic).
    fn lower_int_binary(&mut self, bin: &syn::ExprBinary) -> Option<Option<Value>> {
        use syn::BinOp as B;
        let op = match bin.op {
            B::Add(_) => IntOp::Add,
            B::Sub(_) => IntOp::Sub,
            B::Mul(_) => IntOp::Mul,
            _ => return None,
        };
        let a = self.lower_expr(&bin.left);
        let b = self.lower_expr(&bin.right);
        let (Some(Value::Int(a, alo, ahi)), Some(Value::Int(b, blo, bhi))) = (&a, &b) else {
            if let (Some(a), Some(b)) = (&a, &b) {
                self.error(
                    bin.op.span(),
                    format!(
                        "integer arithmetic needs two integers, found {} and {}: convert a \
                         loop index with `as f32`, and write float literals with a `.0`",
                        a.shape(),
                        b.shape()
                    ),
                );
            }
            return Some(None);
        };
        let corners = [
            op.apply(*alo, *blo),
            op.apply(*alo, *bhi),
            op.apply(*ahi, *blo),
            op.apply(*ahi, *bhi),
        ];
        let (lo, hi) = (
            corners.iter().copied().min().unwrap_or(0),
            corners.iter().copied().max().unwrap_or(0),
        );
        let v = if lo == hi {
            self.b.int(lo, bin.op.span())
        } else {
            self.b.push(Op::IntBin(op, *a, *b), bin.op.span(), None)
        };
        Some(Some(Value::Int(v, lo, hi)))
    }

    /// `const N: usize = 8;` in the body: an integer known at compile time.
    fn lower_const(&mut self, c: &syn::ItemConst) {
        let name = c.ident.to_string();
        let value = match self.lower_expr(&c.expr) {
            Some(v @ Value::Int(_, lo, hi)) if lo == hi => Some(v),
            Some(Value::Int(..)) | None => None,
            Some(v @ Value::Scalar(_)) if is_f32(&c.ty) => Some(v),
            Some(other) => {
                self.error(
                    c.expr.span(),
                    format!(
                        "a `const` in a differentiable body is an integer or an `f32`, found {}",
                        other.shape()
                    ),
                );
                None
            }
        };
        self.declare(name, value, false);
    }

    /// `for i in A..B { ... }` (or `A..=B`): a loop that stays a loop. Variables of the
    /// enclosing scopes assigned in the body are carried from one iteration to the next;
    /// the others are captured.
    fn lower_for(&mut self, f: &syn::ExprForLoop) {
        if let Some(label) = &f.label {
            self.error(label.name.span(), "loop labels are not supported");
        }
        let index_name = match &*f.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                Some(pi.ident.to_string())
            }
            syn::Pat::Wild(_) => None,
            other => {
                self.error(
                    other.span(),
                    "the loop variable must be a name (`for i in 0..8`)",
                );
                return;
            }
        };
        let bounds = match &*f.expr {
            syn::Expr::Range(r) => match (&r.start, &r.end) {
                (Some(a), Some(b)) => {
                    let a = self.constant_integer(a, "a loop's start");
                    let b = self.constant_integer(b, "a loop's end");
                    let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
                    a.zip(b)
                        .map(|(a, b)| (a, if inclusive { b + 1 } else { b }))
                }
                _ => {
                    self.error(r.span(), "a loop's range needs both ends: `for i in 0..8`");
                    None
                }
            },
            other => {
                self.error(
                    other.span(),
                    "loops run over a range with constant ends (`for i in 0..8` or \
                     `0..=7`); iterators, `.rev()` and `.step_by()` are not supported",
                );
                None
            }
        };
        let Some((start, end)) = bounds else {
            // Still check the body for its own errors, without a loop to build.
            let before = self.vars.len();
            self.scopes.push(HashMap::new());
            if let Some(n) = &index_name {
                self.declare(n.clone(), None, false);
            }
            let _ = self.lower_block(&f.body);
            self.scopes.pop();
            self.vars.truncate(before);
            return;
        };
        let span = f.for_token.span;
        // The variables in scope, and which of them the body assigns.
        let assigned = assigned_names(&f.body);
        let visible: Vec<usize> = {
            let mut v: Vec<usize> = self
                .scopes
                .iter()
                .flat_map(|s| s.values().copied())
                .collect();
            v.sort();
            v.dedup();
            v.retain(|id| self.lookup(&self.vars[*id].name) == Some(*id));
            v
        };
        let carried: Vec<usize> = visible
            .iter()
            .copied()
            .filter(|id| assigned.contains(&self.vars[*id].name) && self.vars[*id].mutable)
            .filter(|id| self.vars[*id].value.is_some())
            .collect();
        for id in &carried {
            if let Some(Value::Int(..)) = self.vars[*id].value {
                let name = self.vars[*id].name.clone();
                self.error(
                    span,
                    format!(
                        "`{name}` is an integer changed in the loop: integers other than loop \
                         indices are not supported"
                    ),
                );
                return;
            }
        }
        // The body's inputs: the index, the carried values (flattened), the captures.
        let before: Vec<Option<Value>> = self.vars.iter().map(|v| v.value.clone()).collect();
        let outer = std::mem::replace(&mut self.b, Builder::new(0));
        let index = self.b.add_input(span, index_name.clone());
        let mut init: Vec<ValueId> = Vec::new();
        let body_value = |b: &mut Builder, v: &Value, outer_ids: &mut Vec<ValueId>| -> Value {
            let mut one = |x: ValueId| {
                outer_ids.push(x);
                b.add_input(span, None)
            };
            match v {
                Value::Scalar(x) => Value::Scalar(one(*x)),
                Value::Bool(x) => Value::Bool(one(*x)),
                Value::Int(x, lo, hi) => Value::Int(one(*x), *lo, *hi),
                Value::Array(xs) => Value::Array(xs.iter().map(|x| one(*x)).collect()),
            }
        };
        for id in &carried {
            if let Some(v) = before[*id].clone() {
                let bv = body_value(&mut self.b, &v, &mut init);
                let name = self.vars[*id].name.clone();
                self.name_value(&bv, &name);
                self.vars[*id].value = Some(bv);
            }
        }
        let mut captures: Vec<ValueId> = Vec::new();
        for id in &visible {
            if carried.contains(id) {
                continue;
            }
            if let Some(v) = before[*id].clone() {
                let bv = match &v {
                    // Constants stay constants: no input for them.
                    Value::Int(x, lo, hi) if lo == hi => {
                        let _ = x;
                        Value::Int(self.b.int(*lo, span), *lo, *hi)
                    }
                    _ => body_value(&mut self.b, &v, &mut captures),
                };
                let name = self.vars[*id].name.clone();
                self.name_value(&bv, &name);
                self.vars[*id].value = Some(bv);
            }
        }
        let n_vars = self.vars.len();
        self.scopes.push(HashMap::new());
        if let Some(n) = index_name {
            self.declare(
                n,
                Some(Value::Int(index, start, (end - 1).max(start))),
                false,
            );
        }
        let tail = self.lower_block(&f.body);
        self.scopes.pop();
        if let Tail::Value(_) = tail {
            self.error(
                f.body.span(),
                "a loop body ends with a statement: add `;` after its last expression",
            );
        }
        // The carried values after an iteration: the body's outputs.
        let mut outputs = Vec::new();
        let mut ok = !matches!(tail, Tail::Failed);
        for id in &carried {
            match &self.vars[*id].value {
                Some(Value::Scalar(x)) | Some(Value::Bool(x)) => outputs.push(*x),
                Some(Value::Array(xs)) => outputs.extend(xs),
                _ => ok = false,
            }
        }
        self.vars.truncate(n_vars);
        let body = std::mem::replace(&mut self.b, outer).finish(outputs);
        for (var, v) in self.vars.iter_mut().zip(&before) {
            var.value = v.clone();
        }
        if !ok {
            for id in &carried {
                self.vars[*id].value = None;
            }
            return;
        }
        // Drop the captures the body does not read.
        let used = body.used_inputs();
        let c = init.len();
        let mut keep = vec![true; 1 + c];
        keep.extend(used[1 + c..].iter().copied());
        let kept: Vec<ValueId> = captures
            .iter()
            .zip(&used[1 + c..])
            .filter(|(_, u)| **u)
            .map(|(v, _)| *v)
            .collect();
        let body = body.without_inputs(&keep);
        let node = self.b.push(
            Op::Loop(Box::new(Loop {
                start,
                end: end.max(start),
                init,
                captures: kept,
                body,
                kind: LoopKind::Forward,
            })),
            span,
            None,
        );
        // The carried variables' values after the loop.
        let mut k = 0u32;
        for id in &carried {
            let mut next = |b: &mut Builder| {
                k += 1;
                b.push(Op::Result(node, k - 1), span, None)
            };
            let after = match self.vars[*id].value.clone() {
                Some(Value::Scalar(_)) => Some(Value::Scalar(next(&mut self.b))),
                Some(Value::Bool(_)) => Some(Value::Bool(next(&mut self.b))),
                Some(Value::Array(xs)) => {
                    Some(Value::Array(xs.iter().map(|_| next(&mut self.b)).collect()))
                }
                _ => None,
            };
            if let Some(v) = &after {
                let name = self.vars[*id].name.clone();
                self.name_value(v, &name);
            }
            self.vars[*id].value = after;
        }
    }

    fn lower_method(&mut self, mc: &syn::ExprMethodCall) -> Option<Value> {
        let name = mc.method.to_string();
        let mspan = mc.method.span();
        if let Some(t) = &mc.turbofish {
            self.error(t.span(), "generic arguments on methods are not supported");
            return None;
        }
        let Some(info) = ops::method(&name) else {
            // Still check the receiver, for its own errors.
            let _ = self.lower_expr(&mc.receiver);
            self.error(
                mspan,
                format!(
                    "unsupported method `{name}`; the supported f32 methods are: {}",
                    ops::method_names()
                ),
            );
            return None;
        };
        let args: Vec<&syn::Expr> = std::iter::once(&*mc.receiver).chain(&mc.args).collect();
        self.lower_known_call(info, &args, mspan, mc.paren_token.span.join())
    }

    fn lower_call(&mut self, call: &syn::ExprCall) -> Option<Value> {
        // `f32::sin(x)` is the same as `x.sin()`.
        if let syn::Expr::Path(p) = &*call.func
            && p.qself.is_none()
            && p.path.segments.len() == 2
            && p.path.segments[0].ident == "f32"
        {
            let name = p.path.segments[1].ident.to_string();
            let span = p.path.segments[1].ident.span();
            let Some(info) = ops::method(&name) else {
                self.error(
                    span,
                    format!(
                        "unsupported function `f32::{name}`; the supported f32 methods are: {}",
                        ops::method_names()
                    ),
                );
                return None;
            };
            let args: Vec<&syn::Expr> = call.args.iter().collect();
            return self.lower_known_call(info, &args, span, call.paren_token.span.join());
        }
        if let syn::Expr::Path(p) = &*call.func
            && p.qself.is_none()
        {
            let name = crate::compose::callee_name(&p.path);
            if self.inlining.contains(&name) {
                self.error(
                    call.func.span(),
                    format!(
                        "recursion is not supported: `{name}` calls itself (directly or \
                         through other functions)"
                    ),
                );
                return None;
            }
            if let Some(callee) = self.library.iter().find(|f| f.sig.ident == name).cloned() {
                return self.inline_call(&callee, call);
            }
        }
        self.error(
            call.func.span(),
            "only `#[differentiable]` functions (and `f32::` methods) can be called here",
        );
        None
    }

    /// A call to a differentiable function: its body lowered in place, in a scope of its
    /// own holding its parameters bound to the arguments.
    fn inline_call(&mut self, callee: &syn::ItemFn, call: &syn::ExprCall) -> Option<Value> {
        let name = callee.sig.ident.to_string();
        let mut errors = Vec::new();
        let sig = lower_signature(&callee.sig, &mut errors);
        if !errors.is_empty() {
            // The callee reports these itself.
            return None;
        }
        if sig.result_parts.is_some() {
            self.error(
                call.func.span(),
                format!("`{name}` returns a tuple: calls to functions with tuple results are not supported (return an array)"),
            );
            return None;
        }
        if call.args.len() != sig.params.len() {
            self.error(
                call.paren_token.span.join(),
                format!(
                    "`{name}` takes {} arguments, found {}",
                    sig.params.len(),
                    call.args.len()
                ),
            );
            return None;
        }
        let mut values = Vec::new();
        for (arg, p) in call.args.iter().zip(&sig.params) {
            let v = self.lower_expr(arg)?;
            let want = match p.kind {
                ParamKind::Scalar => Shape::Scalar,
                ParamKind::Array(n) => Shape::Array(n),
            };
            if v.shape() != want {
                self.error(
                    arg.span(),
                    format!(
                        "`{name}` takes {want} for `{}`, found {}",
                        p.name,
                        v.shape()
                    ),
                );
                return None;
            }
            values.push(v);
        }
        let value = self.inline_body(callee, &sig, values.clone())?;
        match (crate::compose::custom_grad(callee), value) {
            (Some(_), Value::Scalar(v)) => self
                .custom_grad(callee, &sig.params, &values, v, call.func.span())
                .map(Value::Scalar),
            (_, value) => Some(value),
        }
    }

    /// `d value / d (the non-constant arguments)` given by the function named in `item`'s
    /// `grad = ...`, lowered with the same arguments: the result is `value` with those
    /// partials ([`Op::CustomGrad`]).
    fn custom_grad(
        &mut self,
        item: &syn::ItemFn,
        params: &[Param],
        values: &[Value],
        value: ValueId,
        span: Span,
    ) -> Option<ValueId> {
        let path = crate::compose::custom_grad(item)?;
        let name = crate::compose::callee_name(&path);
        let Some(grad) = self.library.iter().find(|f| f.sig.ident == name).cloned() else {
            self.error(
                path.span(),
                format!("`{name}` must be a `#[differentiable]` function"),
            );
            return None;
        };
        let mut errors = Vec::new();
        let gsig = lower_signature(&grad.sig, &mut errors);
        let same = gsig.params.len() == params.len()
            && gsig
                .params
                .iter()
                .zip(params)
                .all(|(a, b)| a.kind == b.kind);
        let (args, words): (Vec<ValueId>, usize) = {
            let mut args = Vec::new();
            for (p, v) in params.iter().zip(values) {
                if p.constant {
                    continue;
                }
                match v {
                    Value::Scalar(x) => args.push(*x),
                    Value::Array(xs) => args.extend(xs),
                    _ => {}
                }
            }
            let n = args.len();
            (args, n)
        };
        let expected = if words == 1 {
            ParamKind::Scalar
        } else {
            ParamKind::Array(words)
        };
        if !errors.is_empty()
            || !same
            || !(gsig.result == expected || gsig.result == ParamKind::Array(1) && words == 1)
        {
            self.error(
                path.span(),
                format!(
                    "the custom derivative `{name}` must take the same arguments as `{}` and \
                     return its {words} derivative word{} (the arguments' words in order, \
                     `#[constant]` ones left out): {}",
                    item.sig.ident,
                    if words == 1 { "" } else { "s" },
                    if words == 1 {
                        "`-> f32`".to_string()
                    } else {
                        format!("`-> [f32; {words}]`")
                    }
                ),
            );
            return None;
        }
        if self.inlining.contains(&name) {
            self.error(path.span(), format!("recursion is not supported: `{name}`"));
            return None;
        }
        self.inlining.push(name);
        let partials = self.inline_body(&grad, &gsig, values.to_vec());
        self.inlining.pop();
        let partials = match partials? {
            Value::Scalar(p) => vec![p],
            Value::Array(ps) => ps,
            _ => return None,
        };
        Some(self.b.push(
            Op::CustomGrad {
                value,
                args,
                partials,
            },
            span,
            None,
        ))
    }

    /// A function's body lowered with its parameters bound to `values`, in scopes of its
    /// own.
    fn inline_body(
        &mut self,
        callee: &syn::ItemFn,
        sig: &Signature,
        values: Vec<Value>,
    ) -> Option<Value> {
        let name = callee.sig.ident.to_string();
        let result = match sig.result {
            ParamKind::Scalar => Shape::Scalar,
            ParamKind::Array(n) => Shape::Array(n),
        };
        let saved_scopes = std::mem::replace(&mut self.scopes, vec![HashMap::new()]);
        let saved_vars = self.vars.len();
        let saved_result = self.result.replace(result);
        for (p, v) in sig.params.iter().zip(values) {
            self.declare(p.name.to_string(), Some(v), p.mutable);
        }
        self.inlining.push(name);
        let tail = self.lower_block(&callee.block);
        self.inlining.pop();
        self.result = saved_result;
        self.scopes = saved_scopes;
        self.vars.truncate(saved_vars);
        match tail {
            Tail::Value(v) if v.shape() == result => Some(v),
            _ => None,
        }
    }

    fn lower_known_call(
        &mut self,
        info: &ops::MethodInfo,
        args: &[&syn::Expr],
        span: Span,
        args_span: Span,
    ) -> Option<Value> {
        if args.len() != info.arity {
            let n = info.arity - 1;
            self.error(
                args_span,
                format!(
                    "`{}` takes {n} argument{} besides its receiver, found {}",
                    info.name,
                    if n == 1 { "" } else { "s" },
                    args.len().saturating_sub(1)
                ),
            );
            return None;
        }
        if let Func::Powi(_) = info.func {
            let x = self.scalar(args[0]);
            let n = self.int_literal(args[1]);
            return Some(Value::Scalar(self.b.call(Func::Powi(n?), vec![x?], span)));
        }
        let mut vals = Vec::new();
        let mut ok = true;
        for a in args {
            match self.scalar(a) {
                Some(v) => vals.push(v),
                None => ok = false,
            }
        }
        ok.then(|| Value::Scalar(self.b.call(info.func, vals, span)))
    }

    /// The exponent of `powi`: an integer literal, maybe negated.
    fn int_literal(&mut self, e: &syn::Expr) -> Option<i32> {
        match e {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => match i.base10_parse::<i32>() {
                Ok(v) => Some(v),
                Err(e) => {
                    self.errors.push(e);
                    None
                }
            },
            syn::Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Neg(_),
                expr,
                ..
            }) => self.int_literal(expr).map(|v| -v),
            syn::Expr::Paren(p) => self.int_literal(&p.expr),
            other => {
                self.error(
                    other.span(),
                    "the exponent of `powi` must be an integer literal; use `powf` for a \
                     computed exponent",
                );
                None
            }
        }
    }
}

fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp as B;
    matches!(
        op,
        B::AddAssign(_)
            | B::SubAssign(_)
            | B::MulAssign(_)
            | B::DivAssign(_)
            | B::RemAssign(_)
            | B::BitXorAssign(_)
            | B::BitAndAssign(_)
            | B::BitOrAssign(_)
            | B::ShlAssign(_)
            | B::ShrAssign(_)
    )
}

/// The parts of a tuple type of `f32` and `[f32; N]`, or `None`.
fn tuple_parts(ty: &syn::Type) -> Option<Vec<ParamKind>> {
    match ty {
        syn::Type::Tuple(t) if !t.elems.is_empty() => t
            .elems
            .iter()
            .map(|e| param_type(e, &mut Vec::new()))
            .collect(),
        syn::Type::Group(g) => tuple_parts(&g.elem),
        syn::Type::Paren(p) => tuple_parts(&p.elem),
        _ => None,
    }
}

fn target_has_index(target: &syn::Expr) -> bool {
    matches!(target, syn::Expr::Index(_))
}

/// A checked array index.
enum Index {
    Const(usize),
    Dynamic(ValueId),
}

/// Whether an expression is syntactically integer (a literal or arithmetic with one), so
/// that `i + 1` lowers as integer arithmetic.
fn is_integer_expr(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(_),
            ..
        }) => true,
        syn::Expr::Paren(p) => is_integer_expr(&p.expr),
        syn::Expr::Binary(b) => is_integer_expr(&b.left) || is_integer_expr(&b.right),
        _ => false,
    }
}

/// The names a block assigns (`x = ..`, `x += ..`, `a[i] = ..`), in nested blocks too.
fn assigned_names(block: &syn::Block) -> std::collections::HashSet<String> {
    use syn::visit::Visit;
    struct Assigned(std::collections::HashSet<String>);
    impl Visit<'_> for Assigned {
        fn visit_expr_assign(&mut self, a: &syn::ExprAssign) {
            self.target(&a.left);
            syn::visit::visit_expr_assign(self, a);
        }
        fn visit_expr_binary(&mut self, b: &syn::ExprBinary) {
            if is_compound_assign(&b.op) {
                self.target(&b.left);
            }
            syn::visit::visit_expr_binary(self, b);
        }
    }
    impl Assigned {
        fn target(&mut self, e: &syn::Expr) {
            match e {
                syn::Expr::Index(ix) => self.target(&ix.expr),
                syn::Expr::Paren(p) => self.target(&p.expr),
                syn::Expr::Path(p) => {
                    if let Some(i) = p.path.get_ident() {
                        self.0.insert(i.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let mut a = Assigned(Default::default());
    a.visit_block(block);
    a.0
}
