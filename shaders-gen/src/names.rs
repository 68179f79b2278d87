//! Names of IR values in emitted code, shared by both emitters so that the WGSL and the
//! Rust versions of a function use the same local names and can be read side by side.

use crate::ir::{Function, Op};
use std::collections::{HashMap, HashSet};

/// The name of the WGSL helper with which an adjoint kernel adds its streamed shared
/// gradient words, summed over the workgroup, into its partial sums (generated names never
/// take it, nor the other helpers' names).
pub const REDUCE_STAGE_FN: &str = "gf_reduce_stage";

/// The pipeline-overridable constant of a kernel whose workgroup memory grows with the
/// device's: the bytes of workgroup memory it may use (16 KiB, what WebGPU guarantees,
/// unless the runtime sets it; `gradfuse_runtime::WORKGROUP_BYTES_OVERRIDE` is the same).
pub const WORKGROUP_BYTES_OVERRIDE: &str = "gf_workgroup_bytes";

/// The pipeline-overridable constant of a kernel whose workgroup size the runtime chooses
/// (`@workgroup_size` and everything sized by it): 256 unless the runtime sets it, and the
/// kernel is right at any power of two from 32 to 256 (`gradfuse_runtime`'s
/// `WORKGROUP_SIZE_OVERRIDE` is the same name).
pub const WORKGROUP_SIZE_OVERRIDE: &str = "gf_workgroup_size";

/// The WGSL helper with which an adjoint kernel stores its per-thread sums of consecutive
/// shared words, summed over the workgroup.
pub const REDUCE_RUN_FN: &str = "gf_reduce_run";

/// The WGSL helper both of those call: the sums over the workgroup.
pub const REDUCE_LEVELS_FN: &str = "gf_reduce_levels";
/// The WGSL function that adds up one slot of the wide stage's level sums.
pub const REDUCE_SLOT_FN: &str = "gf_slot_sum";
/// The WGSL helper that adds the wide stage's slots into the workgroup's sums where no two
/// slots hold one word.
pub const REDUCE_DISTINCT_FN: &str = "gf_reduce_distinct";
/// The WGSL helper that adds the wide stage's slots into the workgroup's sums where the
/// kernel knows they hold a run of consecutive words (`emit_wgsl/static_runs.rs`).
pub const SUM_RUN_FN: &str = "gf_sum_run";
/// The workgroup array through which a kernel's first thread hands the values of the
/// shared words alone to the others (`emit_wgsl/hoist.rs`).
pub const HOISTED_ARRAY: &str = "gf_hoisted";

/// Identifiers no local may take: WGSL and Rust keywords and reserved words, the WGSL
/// builtins and helpers gradfuse calls, and the names the generated kernels and Rust
/// functions declare themselves.
const RESERVED: &[&str] = &[
    // Names the emitters declare.
    "params",
    "Params",
    "args",
    "in_base",
    "out_base",
    "values_base",
    "jacobians_base",
    "jacobians",
    "jacobian",
    "values",
    "grads",
    "tangent",
    // `hvp`'s direction: an argument of that name once shadowed it (then named `v`).
    "direction",
    "i",
    "gid",
    "groups",
    "base",
    "forward",
    "adjoint",
    "main",
    "S",
    "Args",
    "Grad",
    "out",
    "lid",
    "elem",
    "in_batch",
    "group",
    "group_base",
    "wid",
    "per_thread",
    "nth",
    "group_first",
    "grad_stage",
    "in_stage",
    "in_group",
    "reduce_stage",
    "outer_stage",
    "out_stage",
    "stage_count",
    "stage_words",
    "owned_sums",
    "word_sums",
    "stage_marks",
    "stage_repeats",
    "shared_grad",
    "shared_args",
    "shared_partials",
    "shared",
    "shared_tangent",
    "Shared",
    "SharedGrad",
    // WGSL builtins used by generated code.
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "pow",
    "abs",
    "sign",
    "min",
    "max",
    "clamp",
    "floor",
    "ceil",
    "round",
    "trunc",
    "fract",
    "fma",
    "length",
    "select",
    "bitcast",
    "vec2",
    "vec3",
    "vec4",
    "array",
    "u32",
    "i32",
    "f32",
    "f16",
    "bool",
    "true",
    "false",
    // WGSL keywords and reserved words that are valid Rust identifiers.
    "alias",
    "bitcast",
    "break",
    "case",
    "const",
    "const_assert",
    "continue",
    "continuing",
    "default",
    "diagnostic",
    "discard",
    "else",
    "enable",
    "fn",
    "for",
    "if",
    // Rust keywords not in WGSL's lists.
    "in",
    "dyn",
    "box",
    "gen",
    "let",
    "loop",
    "override",
    "requires",
    "return",
    "struct",
    "switch",
    "var",
    "while",
    "NULL",
    "Self",
    "abstract",
    "active",
    "alignas",
    "alignof",
    "as",
    "asm",
    "asm_fragment",
    "async",
    "attribute",
    "auto",
    "await",
    "become",
    "binding_array",
    "cast",
    "catch",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "coherent",
    "column_major",
    "common",
    "compile",
    "compile_fragment",
    "concept",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "crate",
    "debugger",
    "decltype",
    "delete",
    "demote",
    "demote_to_helper",
    "do",
    "dynamic_cast",
    "enum",
    "explicit",
    "export",
    "extends",
    "extern",
    "external",
    "fallthrough",
    "filter",
    "final",
    "finally",
    "friend",
    "from",
    "fxgroup",
    "get",
    "goto",
    "groupshared",
    "highp",
    "impl",
    "implements",
    "import",
    "inline",
    "instanceof",
    "interface",
    "layout",
    "lowp",
    "macro",
    "macro_rules",
    "match",
    "mediump",
    "meta",
    "mod",
    "module",
    "move",
    "mut",
    "mutable",
    "namespace",
    "new",
    "nil",
    "noexcept",
    "noinline",
    "nointerpolation",
    "non_coherent",
    "noncoherent",
    "noperspective",
    "null",
    "nullptr",
    "of",
    "operator",
    "package",
    "packoffset",
    "partition",
    "pass",
    "patch",
    "pixelfragment",
    "precise",
    "precision",
    "premerge",
    "priv",
    "protected",
    "pub",
    "public",
    "readonly",
    "ref",
    "regardless",
    "register",
    "reinterpret_cast",
    "require",
    "resource",
    "restrict",
    "self",
    "set",
    "shared",
    "sizeof",
    "smooth",
    "snorm",
    "static",
    "static_assert",
    "static_cast",
    "std",
    "subroutine",
    "super",
    "target",
    "template",
    "this",
    "thread_local",
    "throw",
    "trait",
    "try",
    "type",
    "typedef",
    "typeid",
    "typename",
    "typeof",
    "union",
    "unless",
    "unorm",
    "unsafe",
    "unsized",
    "use",
    "using",
    "varying",
    "virtual",
    "volatile",
    "wgsl",
    "where",
    "with",
    "writeonly",
    "yield",
];

/// A unique, valid local name for every node of `f` (constants get one too, unused).
///
/// A node takes its source name (`let` binding or parameter word) where it has one, else
/// `v` and its index; clashes with reserved words or earlier names get a numeric suffix.
pub fn local_names(f: &Function) -> Vec<String> {
    local_names_with(f, &mut reserved())
}

/// The names taken in one generated function, and for each base name the next suffix to
/// try: a variable assigned 3,000 times is named `s`, `s_1`, .. `s_2999` in linear time (a
/// search from `_1` every time made a long function's emission quadratic: 10,000 statements
/// took 90 s to expand).
#[derive(Clone, Default)]
pub struct Taken {
    names: HashSet<String>,
    next: HashMap<String, usize>,
}

impl Taken {
    /// Whether `name` is taken.
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Takes `name`; false if it was taken.
    pub fn insert(&mut self, name: String) -> bool {
        self.names.insert(name)
    }
}

impl Extend<String> for Taken {
    fn extend<I: IntoIterator<Item = String>>(&mut self, names: I) {
        self.names.extend(names);
    }
}

/// The words no generated name may take: keywords, the kernels' own names, and the WGSL
/// helper functions a kernel may call.
pub fn reserved() -> Taken {
    use crate::abi::KernelKind::*;
    let mut taken = Taken::default();
    taken.extend(
        RESERVED
            .iter()
            .copied()
            .chain(crate::ops::WGSL_HELPERS.iter().map(|(name, _, _)| *name))
            .chain(
                crate::ops::wgsl_helpers(crate::signature::Precision::F64)
                    .iter()
                    .map(|(name, _, _)| *name),
            )
            .chain([
                REDUCE_STAGE_FN,
                REDUCE_RUN_FN,
                REDUCE_LEVELS_FN,
                REDUCE_SLOT_FN,
                REDUCE_DISTINCT_FN,
                SUM_RUN_FN,
                HOISTED_ARRAY,
                WORKGROUP_BYTES_OVERRIDE,
                WORKGROUP_SIZE_OVERRIDE,
                crate::abi::ROWS_ENTRY_POINT,
            ])
            .chain([Forward, Adjoint, Jacobian, Tangent, Hessian].map(|kind| kind.entry_point()))
            .map(str::to_string),
    );
    taken
}

/// [`local_names`] avoiding, and adding to, `taken`: the bodies of loops are named with the
/// names of the enclosing function taken, so every name of a kernel is unique.
pub fn local_names_with(f: &Function, taken: &mut Taken) -> Vec<String> {
    f.nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let base = match (&node.name, &node.op) {
                (_, Op::Const(_)) => return String::new(),
                (Some(n), _) => sanitize(n),
                (None, _) => format!("v{i}"),
            };
            fresh(taken, &base)
        })
        .collect()
}

/// `base`, or `base_k` for the first free `k`, taken.
pub fn fresh(taken: &mut Taken, base: &str) -> String {
    if taken.insert(base.to_string()) {
        return base.to_string();
    }
    // Every suffix below the one remembered was taken when it was tried, and stays taken.
    let mut k = taken.next.get(base).copied().unwrap_or(1);
    let mut name = format!("{base}_{k}");
    while taken.contains(&name) {
        k += 1;
        name = format!("{base}_{k}");
    }
    taken.next.insert(base.to_string(), k + 1);
    taken.insert(name.clone());
    name
}

/// A name valid in WGSL and Rust: raw-identifier prefixes dropped (also inside names
/// derived from one, `t_r#type`: no identifier holds a `#` otherwise), no leading `__`.
pub(crate) fn sanitize(name: &str) -> String {
    let unraw = name.replace("r#", "");
    let name = unraw.as_str();
    let trimmed = name.trim_start_matches('_');
    if trimmed.is_empty() {
        "v".to_string()
    } else if trimmed.len() + 1 < name.len() || name.starts_with("__") {
        format!("u_{trimmed}")
    } else {
        name.to_string()
    }
}

/// The suffixes of elements 1.. of a thread's elements (element 0's names have none).
const ELEMENT_SUFFIXES: [&str; MAX_ELEMENTS] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// The most elements a thread computes side by side (one name suffix each).
pub const MAX_ELEMENTS: usize = 8;

/// `base` for element `e` of a thread's elements.
pub fn element_name(base: &str, e: usize) -> String {
    if e == 0 {
        base.to_string()
    } else {
        format!("{base}_{}", ELEMENT_SUFFIXES[e])
    }
}
