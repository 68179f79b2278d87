//! A recording loop's tape in WGSL: a function-scope array of the carried values of every
//! iteration, which the reverse loop reads back from the last iteration to the first.

use super::float_literal;
use crate::ir::Ty;
use crate::names::Taken;
use crate::names::fresh;
use crate::signature::Precision;

/// Where the word `k` of iteration `index` sits in a tape of `words` per iteration.
pub(super) fn tape_index(index: &str, start: i64, words: usize, k: usize) -> String {
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

/// `tape[at + t] = value[t]` for the words of a carried value of type `ty` (booleans as
/// 0 and 1).
pub(super) fn tape_store(
    tape: &str,
    at: &str,
    value: &str,
    (ty, precision): (Ty, Precision),
    taken: &mut Taken,
) -> String {
    match ty {
        Ty::Bool => format!(
            "{tape}[{at}] = select({}, {}, {value});",
            float_literal(0.0, precision),
            float_literal(1.0, precision)
        ),
        Ty::Array(n) => {
            let t = fresh(taken, "t");
            format!(
                "for (var {t} = 0i; {t} < {n}i; {t}++) {{ {tape}[{at} + {t}] = {value}[{t}]; }}"
            )
        }
        _ => format!("{tape}[{at}] = {value};"),
    }
}

/// The statements binding `name` to a taped carried value of type `ty` at `at`.
pub(super) fn tape_load(
    tape: &str,
    at: &str,
    name: &str,
    (ty, precision): (Ty, Precision),
    taken: &mut Taken,
    indent: &str,
) -> String {
    let scalar = precision.name();
    match ty {
        Ty::Bool => format!(
            "{indent}let {name} = {tape}[{at}] != {};\n",
            float_literal(0.0, precision)
        ),
        Ty::Array(n) => {
            let t = fresh(taken, "t");
            format!(
                "{indent}var {name}: array<{scalar}, {n}>;\n{indent}for (var {t} = 0i; {t} < {n}i; \
                 {t}++) {{ {name}[{t}] = {tape}[{at} + {t}]; }}\n"
            )
        }
        _ => format!("{indent}let {name} = {tape}[{at}];\n"),
    }
}
