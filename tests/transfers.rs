//! Uploads and readbacks of device buffers: sizes that end inside a staging piece, span
//! several pieces and more pieces than are kept in flight, reads into the caller's memory,
//! and ordering with recorded work; on the GPU and on the CPU device. Uploads staged in
//! host memory and in wgpu's mapped buffers give the same words and launches the same bits.

mod common;

use common::device;
use gradfuse::{Device, Error, differentiable};

/// A kernel whose launches of many elements copy their arguments through device buffers.
#[differentiable]
fn mixed(x: [f32; 4]) -> f32 {
    x[0] * x[1] + x[2].sin() - x[3] * x[3]
}

/// A buffer size crossing every boundary of the transfer path: the parallel copy's slices
/// (1 MiB), the staging pieces (32 MiB) and the pieces in flight (three): 4 pieces and a
/// tail of 3 words.
const WORDS: usize = (4 * (32 << 20) + 12) / 4;

/// Distinct words, so that a piece copied to the wrong place shows.
fn pattern(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ seed)
        .collect()
}

fn round_trips(d: &Device) {
    for words in [0, 1, 3, (1 << 20) + 1, WORDS] {
        let host = pattern(words, 7);
        let buffer = d.buffer(&host).unwrap();
        assert_eq!(
            d.read(&buffer).unwrap(),
            host,
            "{words} words on {}",
            d.describe()
        );

        let other = pattern(words, 0xdead_beef);
        d.write(&buffer, &other).unwrap();
        let mut out = vec![0u32; words];
        d.read_into(&buffer, &mut out).unwrap();
        assert_eq!(out, other, "{words} words written on {}", d.describe());
    }
}

#[test]
fn buffers_round_trip_through_every_piece_boundary() {
    round_trips(device());
    round_trips(&Device::cpu());
}

#[test]
fn reads_into_slices_of_other_lengths_are_errors() {
    for d in [device(), &Device::cpu()] {
        let buffer = d.buffer(&[1.0f32, 2.0, 3.0]).unwrap();
        let mut short = vec![0.0f32; 2];
        match d.read_into(&buffer, &mut short) {
            Err(Error::ShapeMismatch { expected, got, .. }) => {
                assert_eq!((expected, got), (3, 2));
            }
            other => panic!("expected a shape mismatch, got {other:?}"),
        }
        assert_eq!(short, [0.0, 0.0], "a refused read writes nothing");
    }
}

#[test]
fn writes_are_ordered_between_reads() {
    // Each write must land after the read before it and before the read after it, even
    // when the write's pieces are still moving as the next call begins.
    let d = device();
    let buffer = d.zeros::<u32>(WORDS).unwrap();
    for round in 0..3u32 {
        let host = pattern(WORDS, round);
        d.write(&buffer, &host).unwrap();
        assert_eq!(d.read(&buffer).unwrap(), host, "round {round}");
    }
}

#[test]
fn uploads_through_host_memory_and_mapped_buffers_agree() {
    if !device().is_gpu() {
        return;
    }
    // A device of its own: the switch drops the device's kept upload buffers and sets.
    let d = Device::gpu().expect("a GPU adapter");
    if d.describe().contains("Vulkan") {
        assert!(d.has_host_staging(), "{}", d.describe());
    }
    let args: Vec<mixed::Args> = (0..300_000)
        .map(|i| mixed::Args {
            x: std::array::from_fn(|k| ((i * 7 + k * 13) % 101) as f32 * 0.02 - 1.0),
        })
        .collect();
    let mut runs = Vec::new();
    for on in [true, false, true] {
        d.set_host_staging(on);
        round_trips(&d);
        runs.push(mixed::kernel(&d).value_and_grad(&args).expect("launch"));
    }
    for (values, grads) in &runs[1..] {
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same(values, &runs[0].0), "values differ between the paths");
        let words = |g: &[mixed::Grad]| g.iter().flat_map(|g| g.x).collect::<Vec<f32>>();
        assert!(same(&words(grads), &words(&runs[0].1)), "gradients differ");
    }
    for e in [0, 1, 150_000, 299_999] {
        let (value, grad) = mixed::value_and_grad(&args[e]);
        assert_eq!(value, mixed(args[e].x), "{e}: the CPU versions");
        assert!(
            (runs[0].0[e] - value).abs() <= 1e-5 * (1.0 + value.abs()),
            "{e}"
        );
        for k in 0..4 {
            let (got, want) = (runs[0].1[e].x[k], grad.x[k]);
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{e}, x[{k}]"
            );
        }
    }
}
