//! Gathered gradients summed by rows on the GPU (the gathered adjoint's `adjoint_rows`
//! entry: one thread per block row computes the elements that read it): an edge read
//! through two indices into one block, a point block beside a camera block whose rows are
//! read too often to go by rows, and a block beside a per-element gradient. Each against
//! the CPU reverse mode summed per row in f64 and the CPU device, central differences for
//! the edges, bit-identical reruns, and the passes a timed recording names (which path ran).

// Per-coordinate loops read clearer than iterator chains over parallel arrays.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{Rng, device, f64_devices};
use gradfuse::{Buffer, Device, Index, Source, differentiable};

#[differentiable]
pub fn edge(p: [f32; 3], q: [f32; 3], #[constant] rest: f32) -> f32 {
    let d = ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2) + (q[2] - p[2]).powi(2)).sqrt();
    0.5 * (d - rest) * (d - rest)
}

/// A camera (scale and offset) seeing a point: two blocks.
#[differentiable]
pub fn project(cam: [f32; 3], pt: [f32; 2], #[constant] obs: f32) -> f32 {
    let u = cam[0] * (pt[0] * pt[0] + pt[1]) + cam[1] * pt[1] + cam[2] - obs;
    u * u
}

/// A spring of per-element stiffness `k` to the origin from a gathered point: a block and a
/// per-element argument with a gradient.
#[differentiable]
pub fn spring(p: [f32; 2], k: f32) -> f32 {
    k * (p[0] * p[0] + p[1] * p[1]).sqrt() + 0.1 * k * k
}

/// Two wires of one block mixed by eight per-element weights: a second evaluation would
/// read the weights again, more than summing the wires' gradients by rows saves.
#[differentiable]
pub fn mix(w: [f32; 8], a: f32, b: f32) -> f32 {
    let mut s = 0.0;
    for k in 0..8 {
        s += w[k] * (a * (k as f32) + b).tanh();
    }
    s
}

/// Two points, one per element and one gathered: their gradients may share a sink.
#[differentiable]
pub fn pull(a: [f32; 2], b: [f32; 2]) -> f32 {
    let dx = a[0] - 2.0 * b[0];
    let dy = a[1] - b[1] * b[1];
    dx * dx + dy * dy
}

/// Sixteen per-element weights on a gathered pair: 18 gradient words per element, stored
/// in chunks through workgroup memory by the plain entry, word by word by rows.
#[differentiable]
pub fn waves(w: [f32; 16], q: [f32; 2]) -> f32 {
    let mut s = 0.0;
    for k in 0..16 {
        s += w[k] * (q[0] * (k as f32) + q[1]).sin();
    }
    s
}

/// Eighteen weights: 20 gradient words, a multiple of 4 (`vec4` chunks).
#[differentiable]
pub fn waves20(w: [f32; 18], q: [f32; 2]) -> f32 {
    let mut s = 0.0;
    for k in 0..18 {
        s += w[k] * (q[0] * (k as f32) + q[1]).sin();
    }
    s
}

/// The edge over f64.
#[differentiable]
pub fn edge64(p: [f64; 3], q: [f64; 3], #[constant] rest: f64) -> f64 {
    let d = ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2) + (q[2] - p[2]).powi(2)).sqrt();
    0.5 * (d - rest) * (d - rest)
}

/// `n` random entries below `rows`, none in the last 2 rows (rows no element reads), each
/// row read by at most `most` entries (a by-rows launch's loop).
fn entries(rng: &mut Rng, n: usize, rows: usize, most: usize) -> Vec<u32> {
    let mut count = vec![0usize; rows];
    (0..n)
        .map(|_| {
            loop {
                let r = (rng.next_u64() % (rows as u64 - 2)) as usize;
                if count[r] < most {
                    count[r] += 1;
                    break r as u32;
                }
            }
        })
        .collect()
}

fn points<const N: usize>(rng: &mut Rng, rows: usize) -> Vec<[f32; N]> {
    (0..rows)
        .map(|_| std::array::from_fn(|_| rng.uniform(-1.0, 1.0)))
        .collect()
}

/// Per-element gradients `grads` (one row of `N` per element) summed into `rows` rows by
/// `index`, in f64.
fn row_sums<const N: usize>(index: &[u32], grads: &[[f32; N]], rows: usize) -> Vec<[f64; N]> {
    let mut sums = vec![[0.0f64; N]; rows];
    for (&r, g) in index.iter().zip(grads) {
        for (s, &x) in sums[r as usize].iter_mut().zip(g) {
            *s += f64::from(x);
        }
    }
    sums
}

/// `got` against `want` within `tol` of the largest `want`.
fn assert_close<const N: usize>(what: &str, got: &[[f32; N]], want: &[[f64; N]], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().flatten().fold(1e-3f64, |a, b| a.max(b.abs()));
    for (r, (g, w)) in got.iter().zip(want).enumerate() {
        for i in 0..N {
            let err = (f64::from(g[i]) - w[i]).abs();
            assert!(
                err <= tol * scale,
                "{what} row {r}[{i}]: {} vs {}",
                g[i],
                w[i]
            );
        }
    }
}

/// The labels of a timed recording's passes (empty where the device has no timestamps).
fn labels(passes: &[(&'static str, std::time::Duration)]) -> Vec<&'static str> {
    passes.iter().map(|(l, _)| *l).collect()
}

struct Edges {
    vertices: Vec<[f32; 3]>,
    p: Vec<u32>,
    q: Vec<u32>,
    rest: Vec<f32>,
}

/// Values, vertex gradients and pass labels of the gathered edge launch on `d`.
fn run_edges(d: &Device, m: &Edges) -> (Vec<f32>, Vec<[f32; 3]>, Vec<&'static str>) {
    let v = d.buffer(&m.vertices).unwrap();
    let (pi, qi): (Index, Index) = (
        d.index(&m.p, m.vertices.len()).unwrap(),
        d.index(&m.q, m.vertices.len()).unwrap(),
    );
    let rest = d.buffer(&m.rest).unwrap();
    let values = d.zeros::<f32>(m.p.len()).unwrap();
    let grad = d.zeros::<[f32; 3]>(m.vertices.len()).unwrap();
    let sources = edge::Sources {
        p: Source::Gather(&v, &pi),
        q: Source::Gather(&v, &qi),
        rest: Source::Each(&rest),
    };
    let mut rec = d.record_timed();
    let sinks = edge::Sinks { p: &grad, q: &grad };
    edge::kernel(d)
        .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
        .unwrap();
    let passes = rec.submit_timed().unwrap();
    (
        d.read(&values).unwrap(),
        d.read(&grad).unwrap(),
        labels(&passes),
    )
}

fn edge_energy_f64(m: &Edges, vertices: &[[f64; 3]]) -> f64 {
    (0..m.p.len())
        .map(|k| {
            let (a, b) = (vertices[m.p[k] as usize], vertices[m.q[k] as usize]);
            let d = (0..3).map(|i| (b[i] - a[i]).powi(2)).sum::<f64>().sqrt();
            0.5 * (d - f64::from(m.rest[k])).powi(2)
        })
        .sum()
}

/// Edges of a random mesh, every vertex read at most 32 times by each index (the most one
/// thread's loop takes), two read by none: summed by rows on a GPU, in one pass.
#[test]
fn edges_summed_by_rows_match_the_cpu_reverse_mode() {
    let mut rng = Rng(11);
    let (v, e) = (700, 4000);
    let p = entries(&mut rng, e, v, 32);
    let q: Vec<u32> = p
        .iter()
        .map(|&a| (a + 1 + (rng.next_u64() % (v as u64 - 4)) as u32) % (v as u32 - 2))
        .collect();
    let m = Edges {
        vertices: points(&mut rng, v),
        p,
        q,
        rest: (0..e).map(|_| rng.uniform(0.2, 0.8)).collect(),
    };
    let mut per_edge = Vec::new();
    let (mut gp, mut gq) = (Vec::new(), Vec::new());
    for k in 0..e {
        let args = edge::Args {
            p: m.vertices[m.p[k] as usize],
            q: m.vertices[m.q[k] as usize],
            rest: m.rest[k],
        };
        let (val, g) = edge::value_and_grad(&args);
        per_edge.push(val);
        gp.push(g.p);
        gq.push(g.q);
    }
    let mut want = row_sums(&m.p, &gp, v);
    for (w, s) in want.iter_mut().zip(row_sums(&m.q, &gq, v)) {
        for i in 0..3 {
            w[i] += s[i];
        }
    }
    for d in [device(), &Device::cpu()] {
        let (values, grad, passes) = run_edges(d, &m);
        for (k, (&got, &w)) in values.iter().zip(&per_edge).enumerate() {
            assert!((got - w).abs() <= 1e-5 * w.abs().max(1e-3), "edge {k}");
        }
        assert_close(&d.describe(), &grad, &want, 1e-5);
        assert_eq!(&grad[v - 2..], &[[0.0; 3]; 2], "rows no edge reads");
        let (values2, grad2, _) = run_edges(d, &m);
        assert_eq!(values, values2, "the same bits on a rerun");
        assert_eq!(grad, grad2, "the same bits on a rerun");
        if d.is_gpu() && !passes.is_empty() {
            assert_eq!(passes, ["edge::adjoint_rows"], "{}", d.describe());
        }
        let base: Vec<[f64; 3]> = m.vertices.iter().map(|v| v.map(f64::from)).collect();
        for (r, i) in [(0usize, 0usize), (5, 2), (77, 1), (698 - 1, 0)] {
            let h = 1e-6;
            let (mut plus, mut minus) = (base.clone(), base.clone());
            plus[r][i] += h;
            minus[r][i] -= h;
            let fd = (edge_energy_f64(&m, &plus) - edge_energy_f64(&m, &minus)) / (2.0 * h);
            let g = f64::from(grad[r][i]);
            assert!(
                (g - fd).abs() <= 1e-3 * fd.abs().max(1.0),
                "vertex {r}[{i}]: {g} vs {fd}"
            );
        }
    }
}

/// Cameras read by hundreds of observations each (summed in chunks, from gradient rows)
/// and points read by a few (by rows, storing the gradient rows the cameras' sum reads).
#[test]
fn points_by_rows_beside_cameras_in_chunks() {
    let mut rng = Rng(12);
    let (cams, pts, n) = (6, 900, 3000);
    let ci: Vec<u32> = (0..n)
        .map(|_| (rng.next_u64() % cams as u64) as u32)
        .collect();
    let pi = entries(&mut rng, n, pts, 8);
    let cam: Vec<[f32; 3]> = points(&mut rng, cams);
    let pt: Vec<[f32; 2]> = points(&mut rng, pts);
    let obs: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let (mut gc, mut gp, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..n {
        let args = project::Args {
            cam: cam[ci[k] as usize],
            pt: pt[pi[k] as usize],
            obs: obs[k],
        };
        let (v, g) = project::value_and_grad(&args);
        vals.push(v);
        gc.push(g.cam);
        gp.push(g.pt);
    }
    let (want_c, want_p) = (row_sums(&ci, &gc, cams), row_sums(&pi, &gp, pts));
    for d in [device(), &Device::cpu()] {
        let run = || {
            let (cb, pb, ob) = (
                d.buffer(&cam).unwrap(),
                d.buffer(&pt).unwrap(),
                d.buffer(&obs).unwrap(),
            );
            let (cx, px) = (d.index(&ci, cams).unwrap(), d.index(&pi, pts).unwrap());
            let values = d.zeros::<f32>(n).unwrap();
            let (dc, dp): (Buffer<[f32; 3]>, Buffer<[f32; 2]>) =
                (d.zeros(cams).unwrap(), d.zeros(pts).unwrap());
            let sources = project::Sources {
                cam: Source::Gather(&cb, &cx),
                pt: Source::Gather(&pb, &px),
                obs: Source::Each(&ob),
            };
            let sinks = project::Sinks { cam: &dc, pt: &dp };
            let mut rec = d.record_timed();
            project::kernel(d)
                .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
                .unwrap();
            let passes = labels(&rec.submit_timed().unwrap());
            let (v, c) = (d.read(&values).unwrap(), d.read(&dc).unwrap());
            (v, c, d.read(&dp).unwrap(), passes)
        };
        let (values, gcam, gpt, passes) = run();
        for (k, (&got, &w)) in values.iter().zip(&vals).enumerate() {
            assert!(
                (got - w).abs() <= 1e-5 * w.abs().max(1e-3),
                "observation {k}"
            );
        }
        assert_close("cameras", &gcam, &want_c, 1e-5);
        assert_close("points", &gpt, &want_p, 1e-5);
        assert_eq!(
            &gpt[pts - 2..],
            &[[0.0; 2]; 2],
            "points no observation reads"
        );
        let (values2, gcam2, gpt2, _) = run();
        assert_eq!((values, gcam, gpt), (values2, gcam2, gpt2), "a rerun");
        if d.is_gpu() && !passes.is_empty() {
            let want = [
                "project::adjoint_rows",
                "scatter_chunks",
                "scatter_partials",
            ];
            assert_eq!(passes, want, "{}", d.describe());
        }
    }
}

/// A block by rows beside a per-element argument whose gradient is each element's own.
#[test]
fn a_block_by_rows_beside_a_per_element_gradient() {
    let mut rng = Rng(13);
    let (rows, n) = (300, 2000);
    let pi = entries(&mut rng, n, rows, 16);
    let pts: Vec<[f32; 2]> = points(&mut rng, rows);
    let k: Vec<f32> = (0..n).map(|_| rng.uniform(0.5, 2.0)).collect();
    let (mut gp, mut gk) = (Vec::new(), Vec::new());
    for e in 0..n {
        let args = spring::Args {
            p: pts[pi[e] as usize],
            k: k[e],
        };
        let g = spring::value_and_grad(&args).1;
        gp.push(g.p);
        gk.push([g.k]);
    }
    let want_p = row_sums(&pi, &gp, rows);
    let want_k: Vec<[f64; 1]> = gk.iter().map(|g| [f64::from(g[0])]).collect();
    for d in [device(), &Device::cpu()] {
        let (pb, kb) = (d.buffer(&pts).unwrap(), d.buffer(&k).unwrap());
        let px = d.index(&pi, rows).unwrap();
        let values = d.zeros::<f32>(n).unwrap();
        let (dp, dk) = (
            d.zeros::<[f32; 2]>(rows).unwrap(),
            d.zeros::<f32>(n).unwrap(),
        );
        let sources = spring::Sources {
            p: Source::Gather(&pb, &px),
            k: Source::Each(&kb),
        };
        let mut rec = d.record_timed();
        spring::kernel(d)
            .value_and_grad_gathered(
                &mut rec,
                &sources,
                &values,
                &spring::Sinks { p: &dp, k: &dk },
            )
            .unwrap();
        let passes = labels(&rec.submit_timed().unwrap());
        assert_close("points", &d.read(&dp).unwrap(), &want_p, 1e-5);
        let got_k: Vec<[f32; 1]> = d.read(&dk).unwrap().into_iter().map(|x| [x]).collect();
        assert_close("stiffness", &got_k, &want_k, 1e-6);
        if d.is_gpu() && !passes.is_empty() {
            assert_eq!(
                passes,
                ["spring::adjoint_rows", "scatter_each"],
                "{}",
                d.describe()
            );
        }
    }
}

/// The same launches by rows and by elements (per-edge gradient rows and the segmented
/// sum, on a device of its own with launches by rows turned off) agree: the same values,
/// and sums of the same gradients in the same order.
#[test]
fn by_rows_and_by_elements_agree() {
    // Without a GPU both are the CPU device's one path.
    let by_elements = Device::auto().expect("a second device");
    by_elements.set_gather_by_rows(false);
    let mut rng = Rng(14);
    let (v, e) = (400, 1500);
    let p = entries(&mut rng, e, v, 6);
    let q = entries(&mut rng, e, v, 6);
    let m = Edges {
        vertices: points(&mut rng, v),
        q: p.iter()
            .zip(&q)
            .map(|(&a, &b)| if a == b { (b + 1) % (v as u32 - 2) } else { b })
            .collect(),
        p,
        rest: (0..e).map(|_| rng.uniform(0.2, 0.8)).collect(),
    };
    let (values, grad, passes) = run_edges(device(), &m);
    let (values_e, grad_e, passes_e) = run_edges(&by_elements, &m);
    if device().is_gpu() && !passes.is_empty() {
        assert_eq!(passes, ["edge::adjoint_rows"]);
        assert_eq!(passes_e, ["edge::adjoint (gathered)", "scatter_rows"]);
    }
    for (k, (a, b)) in values.iter().zip(&values_e).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * a.abs().max(1e-3),
            "edge {k}: {a} vs {b}"
        );
    }
    let want: Vec<[f64; 3]> = grad_e.iter().map(|g| g.map(f64::from)).collect();
    assert_close("by rows against by elements", &grad, &want, 1e-6);
}

/// Elements read through two indices whose second evaluation costs more than it saves go
/// by elements; the results are the same sums.
#[test]
fn costly_elements_read_from_both_sides_go_by_elements() {
    let mut rng = Rng(15);
    let (rows, n) = (200, 1200);
    let (ai, bi) = (
        entries(&mut rng, n, rows, 12),
        entries(&mut rng, n, rows, 12),
    );
    let wires: Vec<f32> = (0..rows).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let w: Vec<[f32; 8]> = points(&mut rng, n);
    let (mut ga, mut gb, mut gw) = (Vec::new(), Vec::new(), Vec::new());
    for e in 0..n {
        let args = mix::Args {
            w: w[e],
            a: wires[ai[e] as usize],
            b: wires[bi[e] as usize],
        };
        let g = mix::value_and_grad(&args).1;
        ga.push([g.a]);
        gb.push([g.b]);
        gw.push(g.w.map(f64::from));
    }
    let mut want = row_sums(&ai, &ga, rows);
    for (x, y) in want.iter_mut().zip(row_sums(&bi, &gb, rows)) {
        x[0] += y[0];
    }
    for d in [device(), &Device::cpu()] {
        let (wb, xb) = (d.buffer(&w).unwrap(), d.buffer(&wires).unwrap());
        let (ax, bx) = (d.index(&ai, rows).unwrap(), d.index(&bi, rows).unwrap());
        let values = d.zeros::<f32>(n).unwrap();
        let (dw, dx) = (
            d.zeros::<[f32; 8]>(n).unwrap(),
            d.zeros::<f32>(rows).unwrap(),
        );
        let sources = mix::Sources {
            w: Source::Each(&wb),
            a: Source::Gather(&xb, &ax),
            b: Source::Gather(&xb, &bx),
        };
        let sinks = mix::Sinks {
            w: &dw,
            a: &dx,
            b: &dx,
        };
        let mut rec = d.record_timed();
        mix::kernel(d)
            .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
            .unwrap();
        let passes = labels(&rec.submit_timed().unwrap());
        let got: Vec<[f32; 1]> = d.read(&dx).unwrap().into_iter().map(|x| [x]).collect();
        assert_close("wires", &got, &want, 1e-5);
        assert_close("weights", &d.read(&dw).unwrap(), &gw, 1e-6);
        if d.is_gpu() && !passes.is_empty() {
            let want = ["mix::adjoint (gathered)", "scatter_each", "scatter_rows"];
            assert_eq!(passes, want, "{}", d.describe());
        }
    }
}

/// An f64 edge by rows: the sums in f64, against the CPU reverse mode summed per vertex.
#[test]
fn f64_edges_by_rows_match_the_cpu_reverse_mode() {
    let mut rng = Rng(16);
    let (v, e) = (300, 1800);
    let p = entries(&mut rng, e, v, 20);
    let q: Vec<u32> = p
        .iter()
        .map(|&a| (a + 1 + (rng.next_u64() % (v as u64 - 4)) as u32) % (v as u32 - 2))
        .collect();
    let vertices: Vec<[f64; 3]> = (0..v)
        .map(|_| std::array::from_fn(|_| f64::from(rng.uniform(-1.0, 1.0))))
        .collect();
    let rest: Vec<f64> = (0..e).map(|_| f64::from(rng.uniform(0.2, 0.8))).collect();
    let (mut want, mut scale) = (vec![[0.0f64; 3]; v], 0.0f64);
    for k in 0..e {
        let args = edge64::Args {
            p: vertices[p[k] as usize],
            q: vertices[q[k] as usize],
            rest: rest[k],
        };
        let g = edge64::value_and_grad(&args).1;
        for i in 0..3 {
            want[p[k] as usize][i] += g.p[i];
            want[q[k] as usize][i] += g.q[i];
            scale = scale.max(g.p[i].abs()).max(g.q[i].abs());
        }
    }
    for d in f64_devices() {
        let vb = d.buffer(&vertices).unwrap();
        let (pi, qi) = (d.index(&p, v).unwrap(), d.index(&q, v).unwrap());
        let rb = d.buffer(&rest).unwrap();
        let values = d.zeros::<f64>(e).unwrap();
        let grad = d.zeros::<[f64; 3]>(v).unwrap();
        let sources = edge64::Sources {
            p: Source::Gather(&vb, &pi),
            q: Source::Gather(&vb, &qi),
            rest: Source::Each(&rb),
        };
        let mut rec = d.record_timed();
        let sinks = edge64::Sinks { p: &grad, q: &grad };
        edge64::kernel(d)
            .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
            .unwrap();
        let passes = labels(&rec.submit_timed().unwrap());
        for (r, (g, w)) in d.read(&grad).unwrap().iter().zip(&want).enumerate() {
            for i in 0..3 {
                let err = (g[i] - w[i]).abs();
                assert!(
                    err <= 1e-13 * 32.0 * scale,
                    "vertex {r}[{i}]: {} vs {}",
                    g[i],
                    w[i]
                );
            }
        }
        if d.is_gpu() && !passes.is_empty() {
            assert_eq!(passes, ["edge64::adjoint_rows"], "{}", d.describe());
        }
    }
}

/// A block's gradient into a sink that an earlier argument's per-element gradient wrote
/// first goes by elements: by rows, the kernel would write the sink before that scatter
/// overwrote it. The sink holds both gradients, added in the order of the arguments.
#[test]
fn a_sink_written_before_its_block_goes_by_elements() {
    let mut rng = Rng(17);
    let n = 500;
    let bi = entries(&mut rng, n, n, 4);
    let a: Vec<[f32; 2]> = points(&mut rng, n);
    let b: Vec<[f32; 2]> = points(&mut rng, n);
    let mut want = vec![[0.0f64; 2]; n];
    for k in 0..n {
        let args = pull::Args {
            a: a[k],
            b: b[bi[k] as usize],
        };
        let g = pull::value_and_grad(&args).1;
        for i in 0..2 {
            want[k][i] += f64::from(g.a[i]);
            want[bi[k] as usize][i] += f64::from(g.b[i]);
        }
    }
    for d in [device(), &Device::cpu()] {
        let (ab, bb) = (d.buffer(&a).unwrap(), d.buffer(&b).unwrap());
        let bx = d.index(&bi, n).unwrap();
        let values = d.zeros::<f32>(n).unwrap();
        let sink = d.zeros::<[f32; 2]>(n).unwrap();
        let sources = pull::Sources {
            a: Source::Each(&ab),
            b: Source::Gather(&bb, &bx),
        };
        let mut rec = d.record_timed();
        let sinks = pull::Sinks { a: &sink, b: &sink };
        pull::kernel(d)
            .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
            .unwrap();
        let passes = labels(&rec.submit_timed().unwrap());
        assert_close("both gradients", &d.read(&sink).unwrap(), &want, 1e-6);
        if d.is_gpu() && !passes.is_empty() {
            let want = ["pull::adjoint (gathered)", "scatter_each", "scatter_rows"];
            assert_eq!(passes, want, "{}", d.describe());
        }
    }
}

/// By rows with wide gradient rows (the plain entry stores them in chunks): a gathered
/// pair's sums by rows, and the per-element weights' gradients from the rows it stores.
macro_rules! wide_gradient_rows_case {
    ($test:ident, $f:ident, $w:literal, $seed:literal) => {
        #[test]
        fn $test() {
            let mut rng = Rng($seed);
            let (rows, n) = (120, 700);
            let qi = entries(&mut rng, n, rows, 10);
            let q: Vec<[f32; 2]> = points(&mut rng, rows);
            let w: Vec<[f32; $w]> = points(&mut rng, n);
            let (mut gq, mut gw) = (Vec::new(), Vec::new());
            for k in 0..n {
                let args = $f::Args {
                    w: w[k],
                    q: q[qi[k] as usize],
                };
                let g = $f::value_and_grad(&args).1;
                gq.push(g.q);
                gw.push(g.w.map(f64::from));
            }
            let want_q = row_sums(&qi, &gq, rows);
            for d in [device(), &Device::cpu()] {
                let (wb, qb) = (d.buffer(&w).unwrap(), d.buffer(&q).unwrap());
                let qx = d.index(&qi, rows).unwrap();
                let values = d.zeros::<f32>(n).unwrap();
                let (dw, dq) = (
                    d.zeros::<[f32; $w]>(n).unwrap(),
                    d.zeros::<[f32; 2]>(rows).unwrap(),
                );
                let sources = $f::Sources {
                    w: Source::Each(&wb),
                    q: Source::Gather(&qb, &qx),
                };
                let mut rec = d.record_timed();
                let sinks = $f::Sinks { w: &dw, q: &dq };
                $f::kernel(d)
                    .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
                    .unwrap();
                let passes = labels(&rec.submit_timed().unwrap());
                assert_close("pairs", &d.read(&dq).unwrap(), &want_q, 1e-5);
                assert_close("weights", &d.read(&dw).unwrap(), &gw, 1e-6);
                if d.is_gpu() && !passes.is_empty() {
                    let rows_entry = concat!(stringify!($f), "::adjoint_rows");
                    assert_eq!(passes, [rows_entry, "scatter_each"], "{}", d.describe());
                }
            }
        }
    };
}

// 18 gradient words: single words through the stage.
wide_gradient_rows_case!(wide_gradient_rows_stored_by_rows, waves, 16, 18);
// 20 gradient words: the plain entry's chunks and the buffer in `vec4`s, which the rows
// entry once wrote word by word (its WGSL did not validate).
wide_gradient_rows_case!(gradient_rows_in_vectors_stored_by_rows, waves20, 18, 19);
