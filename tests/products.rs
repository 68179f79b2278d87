//! Products with Jacobians kept as per-residual blocks (`J·v`, `Jᵀ·u`), against the same
//! products with the explicit, dense Jacobian in f64, on the GPU and the CPU device.

mod common;

use common::{Rng, device};
use gradfuse::{Device, Error, JacobianColumns};

/// A term of `n` residuals of 2 rows reading two rows of one block of `[f32; 3]` rows (the
/// two arguments' gradients landing in one output) and a per-residual `[f32; 2]`.
struct Term {
    n: usize,
    rows: usize,
    blocks: Vec<f32>,
    p: Vec<u32>,
    q: Vec<u32>,
}

const M: usize = 2;
const W: usize = 3 + 3 + 2;

impl Term {
    fn random(n: usize, rows: usize, seed: u64) -> Term {
        let mut rng = Rng(seed);
        let mut index = || -> Vec<u32> {
            (0..n)
                .map(|_| (rng.next_u64() % (rows as u64 - 1)) as u32)
                .collect()
        };
        let (p, q) = (index(), index());
        let mut rng = Rng(seed + 1);
        let blocks = (0..n * M * W).map(|_| rng.uniform(-1.0, 1.0)).collect();
        Term {
            n,
            rows,
            blocks,
            p,
            q,
        }
    }

    /// The dense Jacobian: rows `n × M`; columns the block's `rows × 3` words, then the
    /// per-residual arguments' `n × 2`.
    fn dense(&self) -> Vec<Vec<f64>> {
        let cols = self.rows * 3 + self.n * 2;
        let mut j = vec![vec![0.0f64; cols]; self.n * M];
        for k in 0..self.n {
            for r in 0..M {
                let block = &self.blocks[(k * M + r) * W..(k * M + r + 1) * W];
                for c in 0..3 {
                    j[k * M + r][self.p[k] as usize * 3 + c] += f64::from(block[c]);
                    j[k * M + r][self.q[k] as usize * 3 + c] += f64::from(block[3 + c]);
                }
                for c in 0..2 {
                    j[k * M + r][self.rows * 3 + k * 2 + c] = f64::from(block[6 + c]);
                }
            }
        }
        j
    }
}

fn close(got: f32, want: f64) -> bool {
    (f64::from(got) - want).abs() <= 1e-5 * want.abs().max(1.0)
}

#[test]
fn products_match_the_dense_jacobian() {
    // The last block row is read by no residual.
    let t = Term::random(900, 50, 5);
    let dense = t.dense();
    let mut rng = Rng(9);
    let vb: Vec<f32> = (0..t.rows * 3).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let ve: Vec<f32> = (0..t.n * 2).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let u: Vec<f32> = (0..t.n * M).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let v64: Vec<f64> = vb.iter().chain(&ve).map(|&x| f64::from(x)).collect();
    for d in [device(), &Device::cpu()] {
        let j = d.buffer(&t.blocks).unwrap();
        let (pi, qi) = (
            d.index(&t.p, t.rows).unwrap(),
            d.index(&t.q, t.rows).unwrap(),
        );
        let columns = [
            JacobianColumns {
                words: 3,
                index: Some(&pi),
            },
            JacobianColumns {
                words: 3,
                index: Some(&qi),
            },
            JacobianColumns {
                words: 2,
                index: None,
            },
        ];
        let (vbb, veb, ub) = (
            d.buffer(&vb).unwrap(),
            d.buffer(&ve).unwrap(),
            d.buffer(&u).unwrap(),
        );
        let jv = d.zeros::<f32>(t.n * M).unwrap();
        let (gb, ge) = (
            d.zeros::<f32>(t.rows * 3).unwrap(),
            d.zeros::<f32>(t.n * 2).unwrap(),
        );
        let mut rec = d.record();
        rec.jacobian_times(&j, M, &columns, &[&vbb, &vbb, &veb], &jv)
            .unwrap();
        rec.jacobian_transpose_times(&j, M, &columns, &ub, &[&gb, &gb, &ge])
            .unwrap();
        rec.submit().unwrap();
        let jv = d.read(&jv).unwrap();
        for (row, got) in dense.iter().zip(&jv) {
            let want: f64 = row.iter().zip(&v64).map(|(a, b)| a * b).sum();
            assert!(close(*got, want), "{}: J·v {got} vs {want}", d.describe());
        }
        let jtu: Vec<f32> = d
            .read(&gb)
            .unwrap()
            .into_iter()
            .chain(d.read(&ge).unwrap())
            .collect();
        for (c, got) in jtu.iter().enumerate() {
            let want: f64 = dense
                .iter()
                .zip(&u)
                .map(|(row, u)| row[c] * f64::from(*u))
                .sum();
            assert!(
                close(*got, want),
                "{}: Jᵀu column {c}: {got} vs {want}",
                d.describe()
            );
        }
        // The dot-product identity, the way a solver relies on it: <Jv, u> = <v, Jᵀu>.
        let lhs: f64 = jv
            .iter()
            .zip(&u)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        let rhs: f64 = jtu.iter().zip(&v64).map(|(a, b)| f64::from(*a) * b).sum();
        assert!(
            (lhs - rhs).abs() <= 1e-3 * lhs.abs().max(1.0),
            "{lhs} vs {rhs}"
        );
    }
}

#[test]
fn bad_products_are_errors() {
    let d = device();
    let t = Term::random(10, 5, 1);
    let j = d.buffer(&t.blocks).unwrap();
    let pi = d.index(&t.p, t.rows).unwrap();
    let short = d.index(&t.p[..9], t.rows).unwrap();
    let v = d.zeros::<f32>(t.rows * 3).unwrap();
    let out = d.zeros::<f32>(t.n * M).unwrap();
    let mut rec = d.record();
    let cols = |index| [JacobianColumns { words: 8, index }];
    // A block of 8 columns read through an index of another length.
    let e = rec
        .jacobian_times(&j, M, &cols(Some(&short)), &[&v], &out)
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    // A direction of another length than the block's rows.
    let e = rec
        .jacobian_times(&j, M, &cols(Some(&pi)), &[&v], &out)
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    // An output that is also a direction (blocks of 2 × 2, per-residual arguments).
    let square = d.zeros::<f32>(t.n * M * 2).unwrap();
    let both = d.zeros::<f32>(t.n * 2).unwrap();
    let per_residual = [JacobianColumns {
        words: 2,
        index: None,
    }];
    let e = rec
        .jacobian_times(&square, M, &per_residual, &[&both], &both)
        .unwrap_err();
    assert!(matches!(e, Error::Aliased(_)), "{e}");
    let e = rec
        .jacobian_transpose_times(&square, M, &per_residual, &both, &[&both])
        .unwrap_err();
    assert!(matches!(e, Error::Aliased(_)), "{e}");
    // No columns.
    let e = rec.jacobian_times(&j, M, &[], &[], &out).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    rec.submit().unwrap();
}
