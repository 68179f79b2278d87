//! Learns a ripple adder as a network of logic gates. Every gate holds 16 logits; its soft
//! output is the softmax-weighted sum of the 16 two-input gates relaxed to probabilities
//! (AND is `a b`, XOR is `a + b - 2 a b`, ...), and its two inputs are wired by index to
//! outputs of the layer before: gathered arguments, whose gradients are scattered back per
//! wire. A population of networks, each wired at random, trains at once with Adam, all of it
//! resident on the device; every few steps the host reads the logits, hardens each gate to
//! its largest logit, and checks the hardened circuits on every input. Training stops when
//! one of them adds every pair of numbers correctly. Writes the loss and the hardened
//! accuracy of every network to an SVG file.
//!
//! Run: `cargo run --release --example logic_gates` (a 4-bit adder; `--quick` for a 3-bit
//! adder, as CI does; `--out DIR` for where the plot goes, `target/plots` by default).

use gradfuse::{Adam, Buffer, Device, Index, Source, differentiable};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use std::path::PathBuf;

/// Gates of the last layer that vote on each output bit (their mean is the bit).
const VOTES: usize = 4;

/// The names of the 16 two-input gates, in the order of `soft_gate`'s table.
const GATE_NAMES: [&str; 16] = [
    "0",
    "a AND b",
    "a AND NOT b",
    "a",
    "b AND NOT a",
    "b",
    "a XOR b",
    "a OR b",
    "a NOR b",
    "a XNOR b",
    "NOT b",
    "a OR NOT b",
    "NOT a",
    "b OR NOT a",
    "a NAND b",
    "1",
];

/// A soft gate: the softmax of `logits` weighs the 16 two-input gates at inputs `a` and `b`
/// (probabilities of being 1).
#[differentiable]
pub fn soft_gate(logits: [f32; 16], a: f32, b: f32) -> f32 {
    let ab = a * b;
    let gates = [
        0.0,
        ab,
        a - ab,
        a,
        b - ab,
        b,
        a + b - 2.0 * ab,
        a + b - ab,
        1.0 - (a + b - ab),
        1.0 - (a + b - 2.0 * ab),
        1.0 - b,
        1.0 - b + ab,
        1.0 - a,
        1.0 - a + ab,
        1.0 - ab,
        1.0,
    ];
    let mut top = logits[0];
    for i in 1..16 {
        top = top.max(logits[i]);
    }
    let mut num = 0.0;
    let mut den = 0.0;
    for i in 0..16 {
        let w = (logits[i] - top).exp();
        num += w * gates[i];
        den += w;
    }
    num / den
}

/// The gate's output weighed by `upstream`, the loss's gradient with respect to it: the
/// gradient of the batch sum of this is one layer of back-propagation (to the logits and to
/// the two wires the gate reads).
#[differentiable]
pub fn gate_backward(logits: [f32; 16], a: f32, b: f32, #[constant] upstream: f32) -> f32 {
    upstream * soft_gate(logits, a, b)
}

/// The squared error of an output bit: the mean of its voting gates against `target`.
#[differentiable]
pub fn bit_loss(votes: [f32; 4], #[constant] target: f32) -> f32 {
    let mean = 0.25 * (votes[0] + votes[1] + votes[2] + votes[3]);
    (mean - target) * (mean - target)
}

/// What to learn and with how much.
struct Setup {
    /// Bits of each addend.
    bits: usize,
    /// Networks trained at once.
    nets: usize,
    /// Gates of each hidden layer.
    width: usize,
    /// Layers of gates, the voting layer included.
    depth: usize,
    /// Steps at most.
    steps: usize,
}

impl Setup {
    /// A 4-bit adder learned by 32 networks of 14 layers; a 3-bit adder by 4 networks of
    /// 10 layers with `quick` (about 75 times less work: CI's short run).
    fn new(quick: bool) -> Setup {
        if quick {
            Setup {
                bits: 3,
                nets: 4,
                width: 48,
                depth: 10,
                steps: 1500,
            }
        } else {
            Setup {
                bits: 4,
                nets: 32,
                width: 80,
                depth: 14,
                steps: 3000,
            }
        }
    }
}

/// A reproducible generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// The wiring of a population: per layer, per network and gate, the two wires it reads.
struct Wiring {
    /// Wires of each layer: the inputs, then each layer of gates.
    widths: Vec<usize>,
    /// `wires[l][net * widths[l + 1] + gate]`.
    wires: Vec<Vec<[usize; 2]>>,
}

impl Wiring {
    /// Random wires, local the way a carry travels: a gate serves one bit position and reads
    /// one wire of its own position and one of its own or the position below.
    fn random(s: &Setup, rng: &mut Rng) -> Wiring {
        let outputs = s.bits + 1;
        let mut widths = vec![2 * s.bits];
        widths.extend(std::iter::repeat_n(s.width, s.depth - 1));
        widths.push(outputs * VOTES);
        let position = |l: usize, i: usize| {
            if l == 0 {
                i % s.bits
            } else {
                i * outputs / widths[l]
            }
        };
        let mut wires = Vec::new();
        for l in 1..widths.len() {
            let mut layer = Vec::with_capacity(s.nets * widths[l]);
            for _net in 0..s.nets {
                for g in 0..widths[l] {
                    let p = position(l, g);
                    let of = |keep: &dyn Fn(usize) -> bool| -> Vec<usize> {
                        (0..widths[l - 1])
                            .filter(|&i| keep(position(l - 1, i)))
                            .collect()
                    };
                    let near = of(&|q| q == p || q + 1 == p);
                    let here = of(&|q| q == p);
                    let from = if here.is_empty() { &near } else { &here };
                    let a = from[rng.below(from.len())];
                    let mut b = near[rng.below(near.len())];
                    for _ in 0..16 {
                        if b != a {
                            break;
                        }
                        b = near[rng.below(near.len())];
                    }
                    layer.push([a, b]);
                }
            }
            wires.push(layer);
        }
        Wiring { widths, wires }
    }
}

/// Every sum of two `bits`-bit numbers: inputs (the addends' bits, low first) and target
/// bits, sample by sample.
fn adder_table(bits: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut inputs, mut targets) = (Vec::new(), Vec::new());
    for s in 0..1usize << (2 * bits) {
        let (x, y) = (s & ((1 << bits) - 1), s >> bits);
        inputs.extend((0..bits).map(|i| ((x >> i) & 1) as f32));
        inputs.extend((0..bits).map(|i| ((y >> i) & 1) as f32));
        targets.extend((0..=bits).map(|i| (((x + y) >> i) & 1) as f32));
    }
    (inputs, targets)
}

/// One layer of gates on the device: its logits and their gradient, the indices its
/// elements (network, sample, gate) read through, its outputs and their gradient.
struct Layer {
    logits: Buffer<[f32; 16]>,
    logits_grad: Buffer<[f32; 16]>,
    gate_of: Index,
    wire_a: Index,
    wire_b: Index,
    out: Buffer<f32>,
    out_grad: Buffer<f32>,
    weighted: Buffer<f32>,
}

/// Builds the layers: logits start near the pass-through gate `a` (as residual initialization
/// does), so a deep network starts by carrying its inputs forward.
fn layers(
    d: &Device,
    w: &Wiring,
    nets: usize,
    samples: usize,
    rng: &mut Rng,
) -> Result<Vec<Layer>, gradfuse::Error> {
    let mut out = Vec::new();
    for (l, wires) in w.wires.iter().enumerate() {
        let (before, width) = (w.widths[l], w.widths[l + 1]);
        let logits: Vec<[f32; 16]> = (0..nets * width)
            .map(|_| {
                let mut z = [0.0; 16].map(|_: f32| (rng.below(1000) as f32 / 1000.0 - 0.5) * 0.1);
                z[3] += 5.0;
                z
            })
            .collect();
        let n = nets * samples * width;
        let (mut gate, mut a, mut b) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for net in 0..nets {
            // The inputs are one table for every network; later layers are per network.
            let base = |s: usize| {
                if l == 0 {
                    s * before
                } else {
                    (net * samples + s) * before
                }
            };
            for s in 0..samples {
                for g in 0..width {
                    let [wa, wb] = wires[net * width + g];
                    gate.push((net * width + g) as u32);
                    a.push((base(s) + wa) as u32);
                    b.push((base(s) + wb) as u32);
                }
            }
        }
        let rows = if l == 0 {
            samples * before
        } else {
            nets * samples * before
        };
        out.push(Layer {
            logits: d.buffer(&logits)?,
            logits_grad: d.zeros(nets * width)?,
            gate_of: d.index(&gate, nets * width)?,
            wire_a: d.index(&a, rows)?,
            wire_b: d.index(&b, rows)?,
            out: d.zeros(n)?,
            out_grad: d.zeros(n)?,
            weighted: d.zeros(n)?,
        });
    }
    Ok(out)
}

/// The kernels of one training step.
struct Kernels<'d> {
    forward: soft_gate::Kernel<'d>,
    backward: gate_backward::Kernel<'d>,
    loss: bit_loss::Kernel<'d>,
}

/// The population's data on the device beside its layers.
struct Data {
    inputs: Buffer<f32>,
    /// The gradient with respect to the inputs: computed by the first layer's launch, unused.
    inputs_grad: Buffer<f32>,
    /// The last layer's outputs and their gradient, as the rows of votes for each bit.
    votes: Buffer<[f32; 4]>,
    votes_grad: Buffer<[f32; 4]>,
    targets: Buffer<f32>,
    losses: Buffer<f32>,
}

/// Records one training step: every layer forward, the loss and its gradient with respect
/// to the votes, every layer backward, then Adam on every layer's logits.
fn record_step(
    rec: &mut gradfuse::Recording<'_>,
    k: &Kernels<'_>,
    layers: &[Layer],
    data: &Data,
    adam: &mut Adam,
) -> Result<(), gradfuse::Error> {
    let input_of = |l: usize| {
        if l == 0 {
            &data.inputs
        } else {
            &layers[l - 1].out
        }
    };
    for (l, layer) in layers.iter().enumerate() {
        let sources = soft_gate::Sources {
            logits: Source::Gather(&layer.logits, &layer.gate_of),
            a: Source::Gather(input_of(l), &layer.wire_a),
            b: Source::Gather(input_of(l), &layer.wire_b),
        };
        k.forward.value_gathered(rec, &sources, &layer.out)?;
    }
    k.loss.value_and_grad_gathered(
        rec,
        &bit_loss::Sources {
            votes: Source::Each(&data.votes),
            target: Source::Each(&data.targets),
        },
        &data.losses,
        &bit_loss::Sinks {
            votes: &data.votes_grad,
        },
    )?;
    for (l, layer) in layers.iter().enumerate().rev() {
        let input_grad = if l == 0 {
            &data.inputs_grad
        } else {
            &layers[l - 1].out_grad
        };
        let sources = gate_backward::Sources {
            logits: Source::Gather(&layer.logits, &layer.gate_of),
            a: Source::Gather(input_of(l), &layer.wire_a),
            b: Source::Gather(input_of(l), &layer.wire_b),
            upstream: Source::Each(&layer.out_grad),
        };
        let sinks = gate_backward::Sinks {
            logits: &layer.logits_grad,
            a: input_grad,
            b: input_grad,
        };
        k.backward
            .value_and_grad_gathered(rec, &sources, &layer.weighted, &sinks)?;
    }
    for layer in layers {
        adam.step(rec, &layer.logits, &layer.logits_grad)?;
    }
    Ok(())
}

/// The hardened gate `kind` (an index into [`GATE_NAMES`]): its truth table is the bits
/// of `kind`, `f(1,1)` lowest.
fn hard_gate(kind: usize, a: bool, b: bool) -> bool {
    (kind >> (3 - 2 * a as usize - b as usize)) & 1 == 1
}

/// The index of the largest logit: the gate a soft gate hardens to.
fn hardened_kind(logits: &[f32; 16]) -> usize {
    (0..16).fold(0, |best, i| if logits[i] > logits[best] { i } else { best })
}

/// Network `net` hardened, run on every sample: how many samples it adds correctly, and
/// how many output bits it gets right.
fn hardened_score(
    w: &Wiring,
    logits: &[Vec<[f32; 16]>],
    net: usize,
    inputs: &[f32],
    targets: &[f32],
) -> (usize, usize) {
    let (fan_in, outputs) = (w.widths[0], targets.len() / (inputs.len() / w.widths[0]));
    let (mut sums, mut bits) = (0, 0);
    for (x, t) in inputs.chunks(fan_in).zip(targets.chunks(outputs)) {
        let mut wires: Vec<bool> = x.iter().map(|&v| v > 0.5).collect();
        for (l, layer) in w.wires.iter().enumerate() {
            let width = w.widths[l + 1];
            wires = (0..width)
                .map(|g| {
                    let [a, b] = layer[net * width + g];
                    hard_gate(
                        hardened_kind(&logits[l][net * width + g]),
                        wires[a],
                        wires[b],
                    )
                })
                .collect();
        }
        let right = (0..outputs)
            .filter(|&i| {
                let ones = wires[i * VOTES..(i + 1) * VOTES]
                    .iter()
                    .filter(|&&v| v)
                    .count();
                (2 * ones > VOTES) == (t[i] > 0.5)
            })
            .count();
        bits += right;
        sums += usize::from(right == outputs);
    }
    (sums, bits)
}

/// The gates of network `net` that an output depends on, counted by kind.
fn live_gates(w: &Wiring, logits: &[Vec<[f32; 16]>], net: usize) -> [usize; 16] {
    let mut kinds = [0; 16];
    let mut live: Vec<bool> = vec![true; *w.widths.last().unwrap_or(&0)];
    for (l, layer) in w.wires.iter().enumerate().rev() {
        let width = w.widths[l + 1];
        let mut below = vec![false; w.widths[l]];
        for g in (0..width).filter(|&g| live[g]) {
            let kind = hardened_kind(&logits[l][net * width + g]);
            kinds[kind] += 1;
            let [a, b] = layer[net * width + g];
            // A gate that ignores an input does not make it live.
            below[a] |= (0..4).any(|v| {
                hard_gate(kind, v & 1 == 1, v & 2 == 2) != hard_gate(kind, v & 1 == 0, v & 2 == 2)
            });
            below[b] |= (0..4).any(|v| {
                hard_gate(kind, v & 1 == 1, v & 2 == 2) != hard_gate(kind, v & 1 == 1, v & 2 == 0)
            });
        }
        live = below;
    }
    kinds
}

/// Every layer's logits, as read from the device: `[layer][net * width + gate]`.
type Logits = Vec<Vec<[f32; 16]>>;

/// A check of the population: at `step`, each network's mean loss and hardened accuracy.
struct Check {
    step: usize,
    loss: Vec<f32>,
    accuracy: Vec<f32>,
    /// Each network's (sums right, output bits right), hardened.
    scores: Vec<(usize, usize)>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut quick = false;
    let mut out = PathBuf::from("target/plots");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--out" => out = args.next().map_or(out, PathBuf::from),
            other => eprintln!("logic_gates: ignoring unknown argument {other}"),
        }
    }
    let s = Setup::new(quick);
    let device = Device::auto()?;
    println!("device: {}", device.describe());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let wiring = Wiring::random(&s, &mut rng);
    let samples = 1 << (2 * s.bits);
    let (inputs, targets) = adder_table(s.bits);
    let gates: usize = wiring.widths[1..].iter().sum();
    println!(
        "{}-bit adder: {samples} sums; {} networks of {} layers, {gates} gates each",
        s.bits, s.nets, s.depth
    );
    let layers = layers(&device, &wiring, s.nets, samples, &mut rng)?;
    let all_targets: Vec<f32> = targets
        .iter()
        .copied()
        .cycle()
        .take(s.nets * targets.len())
        .collect();
    let last = layers.last().ok_or("a network has at least one layer")?;
    let data = Data {
        votes: last.out.cast()?,
        votes_grad: last.out_grad.cast()?,
        inputs: device.buffer(&inputs)?,
        inputs_grad: device.zeros(inputs.len())?,
        targets: device.buffer(&all_targets)?,
        losses: device.zeros(all_targets.len())?,
    };
    let kernels = Kernels {
        forward: soft_gate::kernel(&device),
        backward: gate_backward::kernel(&device),
        loss: bit_loss::kernel(&device),
    };
    let mut adam = Adam::new(0.05);
    let every = 50;
    let bar = ProgressBar::new(s.steps as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut checks: Vec<Check> = Vec::new();
    let mut winner = None;
    for chunk in 0..s.steps / every {
        let mut rec = device.record();
        for _ in 0..every {
            record_step(&mut rec, &kernels, &layers, &data, &mut adam)?;
        }
        rec.submit()?;
        let step = (chunk + 1) * every;
        let (check, logits) = check(&device, &layers, &data, &wiring, step, (&inputs, &targets))?;
        let best = (0..s.nets).max_by_key(|&n| check.scores[n]).unwrap_or(0);
        let score = check.scores[best];
        bar.set_position(step as u64);
        bar.set_message(format!(
            "best hardened network: {}/{samples} sums, mean loss {:.2e}",
            score.0,
            check.loss.iter().sum::<f32>() / s.nets as f32
        ));
        checks.push(check);
        if score.0 == samples {
            winner = Some((best, step, score, logits));
            break;
        }
    }
    bar.finish();
    let path = plot(&out, &checks)?;
    println!("loss and hardened accuracy: {}", path.display());
    let Some((net, step, (sums, bits), logits)) = winner else {
        return Err(format!(
            "no network hardened to a correct adder in {} steps",
            s.steps
        )
        .into());
    };
    println!(
        "network {net} of {} hardened to a correct {}-bit adder at step {step}: \
         {sums}/{samples} sums, {bits}/{} output bits",
        s.nets,
        s.bits,
        samples * (s.bits + 1)
    );
    print_circuit(&wiring, &logits, net);
    Ok(())
}

/// Reads the population's losses and logits after `step` and scores every network
/// hardened, on the adder's `table` (inputs, targets).
fn check(
    device: &Device,
    layers: &[Layer],
    data: &Data,
    wiring: &Wiring,
    step: usize,
    (inputs, targets): (&[f32], &[f32]),
) -> Result<(Check, Logits), gradfuse::Error> {
    let losses = device.read(&data.losses)?;
    let logits = layers
        .iter()
        .map(|l| device.read(&l.logits))
        .collect::<Result<Vec<_>, _>>()?;
    let nets = losses.len() / targets.len();
    let samples = inputs.len() / wiring.widths[0];
    let scores: Vec<(usize, usize)> = (0..nets)
        .map(|n| hardened_score(wiring, &logits, n, inputs, targets))
        .collect();
    let check = Check {
        step,
        loss: losses
            .chunks(targets.len())
            .map(|c| c.iter().sum::<f32>() / c.len() as f32)
            .collect(),
        accuracy: scores
            .iter()
            .map(|&(sums, _)| 100.0 * sums as f32 / samples as f32)
            .collect(),
        scores,
    };
    Ok((check, logits))
}

/// Prints the gates network `net`'s outputs depend on, by kind.
fn print_circuit(wiring: &Wiring, logits: &[Vec<[f32; 16]>], net: usize) {
    let kinds = live_gates(wiring, logits, net);
    let live: usize = kinds.iter().sum();
    let listed: Vec<String> = (0..16)
        .filter(|&k| kinds[k] > 0)
        .map(|k| format!("{} {}", kinds[k], GATE_NAMES[k]))
        .collect();
    println!(
        "its circuit: {live} gates the outputs depend on ({})",
        listed.join(", ")
    );
}

/// Writes each network's loss (log scale) and hardened accuracy against the step to
/// `dir/logic_gates.svg`.
fn plot(dir: &std::path::Path, checks: &[Check]) -> Result<PathBuf, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("logic_gates.svg");
    {
        let root = SVGBackend::new(&path, (1100, 450)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(550);
        let last = checks.last().map_or(1, |c| c.step);
        let nets = checks.first().map_or(0, |c| c.loss.len());
        let losses = checks.iter().flat_map(|c| c.loss.iter().copied());
        let lo = losses.clone().fold(f32::MAX, f32::min).max(1e-6) * 0.5;
        let hi = losses.fold(1e-6, f32::max) * 2.0;
        let mut chart = ChartBuilder::on(&left)
            .caption("soft loss of each network", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0..last, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("mean squared error")
            .draw()?;
        for n in 0..nets {
            let color = Palette99::pick(n);
            chart.draw_series(LineSeries::new(
                checks.iter().map(|c| (c.step, c.loss[n])),
                &color,
            ))?;
        }
        let mut chart = ChartBuilder::on(&right)
            .caption("hardened accuracy of each network", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0..last, 0f32..101.0)?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("sums right (%)")
            .draw()?;
        for n in 0..nets {
            let color = Palette99::pick(n);
            chart.draw_series(LineSeries::new(
                checks.iter().map(|c| (c.step, c.accuracy[n])),
                &color,
            ))?;
        }
        root.present()?;
    }
    Ok(path)
}
