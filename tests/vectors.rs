//! Vector operations with scalars kept on the device (the conjugate-gradient steps of the
//! least-squares solver): dot products of vectors split over buffers against f64 sums,
//! bit-identical reruns, combinations with constant and ratio coefficients.

mod common;

use common::{Rng, device};
use gradfuse::{Coefficient, Device, Error};

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

#[test]
fn dot_products_match_f64_and_rerun_bit_identically() {
    // Lengths: empty, one word, one group's worth, past the groups' cap (strided threads).
    let lengths = [0usize, 1, 256, 1000, 300_000];
    let a: Vec<Vec<f32>> = lengths.iter().map(|&n| random(n, n as u64 + 1)).collect();
    let b: Vec<Vec<f32>> = lengths.iter().map(|&n| random(n, n as u64 + 7)).collect();
    let want: f64 = a
        .iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let mut results = Vec::new();
    for d in [device(), &Device::cpu()] {
        let (ab, bb): (Vec<_>, Vec<_>) = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (d.buffer(x).unwrap(), d.buffer(y).unwrap()))
            .unzip();
        let pairs: Vec<_> = ab.iter().zip(&bb).collect();
        let scalars = d.zeros::<f32>(4).unwrap();
        let mut rec = d.record();
        rec.dot(&pairs, &scalars, 2).unwrap();
        // The one-pair dot of the longest vector with itself, into another slot.
        rec.dot(&[pairs[4]], &scalars, 0).unwrap();
        rec.submit().unwrap();
        let s = d.read(&scalars).unwrap();
        let got = f64::from(s[2]);
        assert!(
            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
            "{}: {got} vs {want}",
            d.describe()
        );
        let again = {
            let mut rec = d.record();
            rec.dot(&pairs, &scalars, 3).unwrap();
            rec.submit().unwrap();
            d.read(&scalars).unwrap()[3]
        };
        assert_eq!(s[2].to_bits(), again.to_bits(), "{}", d.describe());
        results.push(s[2]);
    }
    assert!((results[0] - results[1]).abs() <= 1e-4 * results[1].abs().max(1.0));
}

#[test]
fn combinations_read_their_coefficients_on_the_device() {
    let (x, y) = (random(5000, 1), random(5000, 2));
    for d in [device(), &Device::cpu()] {
        let (xb, yb) = (d.buffer(&x).unwrap(), d.buffer(&y).unwrap());
        let scalars = d.buffer(&[3.0f32, 4.0, 0.5]).unwrap();
        let mut rec = d.record();
        // y = -(3/4) x + 2 y, then y = 1 x + (0.5/4) y.
        let ratio = Coefficient::Ratio {
            num: 0,
            den: 1,
            sign: -1.0,
        };
        rec.combine(&[(&xb, &yb)], ratio, Coefficient::Value(2.0), &scalars)
            .unwrap();
        let eighth = Coefficient::Ratio {
            num: 2,
            den: 1,
            sign: 1.0,
        };
        rec.combine(&[(&xb, &yb)], Coefficient::Value(1.0), eighth, &scalars)
            .unwrap();
        rec.submit().unwrap();
        let got = d.read(&yb).unwrap();
        for i in 0..x.len() {
            let first = -0.75 * f64::from(x[i]) + 2.0 * f64::from(y[i]);
            let want = f64::from(x[i]) + 0.125 * first;
            assert!(
                (f64::from(got[i]) - want).abs() <= 1e-6,
                "{}: {i}",
                d.describe()
            );
        }
    }
}

#[test]
fn a_zero_b_overwrites_and_a_ratio_over_zero_is_zero() {
    // y holds NaN and infinity: b = 0 copies a x over them without reading them (0 × NaN
    // would be NaN); a ratio whose denominator is 0 is 0 (CG that converged exactly).
    let x = random(700, 3);
    let y = [f32::NAN, f32::INFINITY].repeat(350);
    for d in [device(), &Device::cpu()] {
        let (xb, yb, zb) = (
            d.buffer(&x).unwrap(),
            d.buffer(&y).unwrap(),
            d.buffer(&x).unwrap(),
        );
        let scalars = d.buffer(&[3.0f32, 0.0]).unwrap();
        let over_zero = Coefficient::Ratio {
            num: 0,
            den: 1,
            sign: 1.0,
        };
        let mut rec = d.record();
        rec.combine(
            &[(&xb, &yb)],
            Coefficient::Value(2.0),
            Coefficient::Value(0.0),
            &scalars,
        )
        .unwrap();
        rec.combine(&[(&xb, &zb)], over_zero, Coefficient::Value(1.0), &scalars)
            .unwrap();
        rec.submit().unwrap();
        let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        assert_eq!(d.read(&yb).unwrap(), want, "{}", d.describe());
        assert_eq!(d.read(&zb).unwrap(), x, "{}", d.describe());
    }
}

#[test]
fn bad_vector_operations_are_errors() {
    let d = device();
    let (x, y) = (d.zeros::<f32>(10).unwrap(), d.zeros::<f32>(11).unwrap());
    let scalars = d.zeros::<f32>(2).unwrap();
    let mut rec = d.record();
    let e = rec.dot(&[(&x, &y)], &scalars, 0).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = rec.dot(&[(&x, &x)], &scalars, 2).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    let e = rec
        .combine(
            &[(&x, &x)],
            Coefficient::Value(1.0),
            Coefficient::Value(1.0),
            &scalars,
        )
        .unwrap_err();
    assert!(matches!(e, Error::Aliased(_)), "{e}");
    let far = Coefficient::Ratio {
        num: 0,
        den: 5,
        sign: 1.0,
    };
    let e = rec
        .combine(&[(&x, &x)], far, Coefficient::Value(1.0), &scalars)
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    rec.submit().unwrap();
}
