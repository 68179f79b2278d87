//! What each supported function costs on the device, in FMAs, measured in the same run as
//! the corpus: a chain of calls per thread timed against the same chain without the call.
//! The roofline's arithmetic bound counts every IR operation as one FMA; a transcendental
//! call takes several on any GPU, so a kernel of calls would look far from a bound it is
//! at. With these costs the bound counts each call as what it measured (never less than
//! one FMA, the old count), and every other operation as one, as before.

use crate::ceilings::{inputs, kernel_time};
use crate::compiled::compiled_spec;
use gradfuse::{Device, Error};
use gradfuse_shaders_gen::abi::KernelKind;
use gradfuse_shaders_gen::compile_str;
use gradfuse_shaders_gen::ir::Op;
use gradfuse_shaders_gen::ops::{Func, METHODS};
use std::fmt::Write as _;

/// Calls per thread in a chain.
const TRIPS: usize = 64;

/// Each function's measured cost in FMAs per call.
pub struct Costs {
    by_func: Vec<(Func, f64)>,
}

impl Costs {
    /// What `op` costs: its function's measured cost for a call (at least 1), else 1.
    pub fn of(&self, op: &Op) -> f64 {
        let Op::Call(f, _) = op else { return 1.0 };
        let key = match f {
            Func::Powi(_) => Func::Powi(0),
            f => *f,
        };
        self.by_func
            .iter()
            .find(|(g, _)| *g == key)
            .map_or(1.0, |&(_, c)| c.max(1.0))
    }

    /// Measures every method and division on `d` at `n` threads, `fma_rate` the measured
    /// FMAs per second; with the table of what it measured.
    pub fn measure(d: &Device, n: usize, fma_rate: f64) -> Result<(Costs, String), Error> {
        let mut table = String::from(
            "\nWhat a call costs on this device, in FMAs (a chain of 64 calls per thread against the same chain without them):\n\n| call | FMAs |\n|---|---|\n",
        );
        let input = inputs(n, 1);
        let base = chain_time(d, "y", &input)?;
        let mut calls: Vec<(Func, String, String)> = METHODS
            .iter()
            .map(|m| (m.func, m.name.to_string(), call_of(m.name)))
            .collect();
        calls.push((Func::Div, "division".into(), "0.3 / y".into()));
        let mut by_func = Vec::new();
        for (func, name, call) in calls {
            let t = chain_time(d, &call, &input)?;
            let cost = ((t - base) * fma_rate / (n * TRIPS) as f64).max(0.0);
            let _ = writeln!(table, "| {name} | {cost:.1} |");
            by_func.push((func, cost));
        }
        Ok((Costs { by_func }, table))
    }
}

/// A call of method `name` on `y`, its other arguments constants that keep the chain
/// inside every domain.
fn call_of(name: &str) -> String {
    match name {
        "powi" => "y.powi(3)".into(),
        "atan2" => "y.atan2(0.7)".into(),
        "powf" => "y.powf(1.5)".into(),
        "min" => "y.min(0.6)".into(),
        "max" => "y.max(0.4)".into(),
        "hypot" => "y.hypot(0.3)".into(),
        "clamp" => "y.clamp(0.2, 0.8)".into(),
        "mul_add" => "y.mul_add(0.9, 0.1)".into(),
        name => format!("y.{name}()"),
    }
}

/// GPU seconds of the value kernel of `y = call * 0.001 + 0.5`, 64 times per thread: the
/// chain stays in [0.49, 0.51], inside every function's domain.
fn chain_time(d: &Device, call: &str, input: &[f32]) -> Result<f64, Error> {
    let src = format!(
        "fn chain(x: f32) -> f32 {{ let mut y = x * 0.01 + 0.5; for i in 0..{TRIPS} {{ y = {call} * 0.001 + 0.5; }} y }}"
    );
    let c = compile_str(&src).map_err(|e| Error::Unsupported(format!("{src}: {e:?}")))?;
    let spec = compiled_spec("chain", &c, KernelKind::Forward);
    kernel_time(d, spec, input, 3, crate::LAUNCHES)
}
