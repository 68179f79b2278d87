//! Pinned host memory (`Device::pinned`): launches and transfers that read and write it
//! move it with the GPU's copies straight between it and device buffers, and give the
//! same bits as from ordinary memory: whole slices and parts of them, over several chunks
//! of a launch (a device whose chunks are capped small, and one with the runtime's own),
//! with pinned and ordinary slices mixed, for values, gradients, Jacobians and Hessians; on
//! the CPU device it is ordinary memory.

mod common;

use common::{device, rel_error};
use gradfuse::{Device, Error, Pinned, differentiable};

/// Wide rows (256 words in, 256 gradient words out), so that a launch of a few hundred
/// thousand elements takes several chunks, and a shared pair summed over the batch.
#[differentiable]
pub fn wide(p: [f32; 256], #[shared] w: [f32; 2]) -> f32 {
    let mut s = 0.0;
    for k in 0..256 {
        s += p[k] * p[k] * w[0] + p[k] * w[1];
    }
    s
}

fn row(i: usize) -> wide::Args {
    let mut p = [0.0; 256];
    for (k, p) in p.iter_mut().enumerate() {
        *p = ((i * 31 + k * 7) % 97) as f32 / 97.0 - 0.5;
    }
    wide::Args { p }
}

const SHARED: wide::Shared = wide::Shared { w: [0.75, -0.25] };

/// `value_and_grad_into` from ordinary memory: the oracle.
fn plain(d: &Device, args: &[wide::Args]) -> (Vec<f32>, Vec<wide::Grad>, wide::SharedGrad) {
    let mut values = vec![0.0; args.len()];
    let mut grads = vec![bytemuck::Zeroable::zeroed(); args.len()];
    let shared = wide::kernel(d)
        .value_and_grad_into(args, &SHARED, &mut values, &mut grads)
        .expect("launch from ordinary memory");
    (values, grads, shared)
}

fn bits<T: bytemuck::Pod>(x: &[T]) -> &[u32] {
    bytemuck::cast_slice(x)
}

/// The f32 words of `x`, widened: for comparing a launch with the CPU reverse mode.
fn wide_words<T: bytemuck::Pod>(x: &[T]) -> Vec<f64> {
    bytemuck::cast_slice::<T, f32>(x)
        .iter()
        .map(|&w| w as f64)
        .collect()
}

/// Asserts that a launch's words `got` are within 1e-5 of the CPU's `want` (relative to the
/// largest of them).
fn near_cpu<T: bytemuck::Pod>(got: &[T], want: &[T], what: &str) {
    let e = rel_error(&wide_words(got), &wide_words(want), 1.0);
    assert!(e < 1e-5, "{what}: {e:.1e} from the CPU reverse mode");
}

/// Two and a half chunks' elements, or a few thousand where a launch is one chunk (the
/// CPU device) or its chunks are large.
fn several_chunks(d: &Device) -> usize {
    let chunk = d.chunk_elements(&wide::ADJOINT_KERNEL);
    if chunk < 1 << 14 {
        2 * chunk + chunk / 2 + 3
    } else {
        5000
    }
}

/// A GPU device of the test's own, where the tests run on a GPU: the tests of this file
/// run at once, and those that count a device's pinned copies must not count another's.
fn own_gpu() -> Option<Device> {
    device()
        .is_gpu()
        .then(|| Device::gpu().expect("a device of the test's own"))
}

/// [`own_gpu`] with launches cut into chunks of 1 MiB per buffer (1,024 elements of
/// `wide`).
fn small_chunks() -> Option<Device> {
    own_gpu().inspect(|d| d.set_chunk_bytes(1 << 20))
}

#[test]
fn launches_from_and_into_pinned_memory_give_the_bits_of_ordinary_memory() {
    let (small, own) = (small_chunks(), own_gpu());
    for d in small.iter().chain(&own).chain([&Device::cpu()]) {
        let n = several_chunks(d);
        // The same arguments in the program's memory and in pinned memory.
        let ordinary: Vec<wide::Args> = (0..n).map(row).collect();
        let mut args: Pinned<wide::Args> = d.pinned(n).expect("pinned arguments");
        args.copy_from_slice(&ordinary);
        assert_eq!(args.is_pinned(), d.has_host_staging(), "{}", d.describe());
        let (values, grads, shared) = plain(d, &ordinary);
        let kernel = wide::kernel(d);

        // Everything pinned.
        let mut pv: Pinned<f32> = d.pinned(n).expect("pinned values");
        let mut pg: Pinned<wide::Grad> = d.pinned(n).expect("pinned gradients");
        let before = d.pinned_copies();
        let s = kernel
            .value_and_grad_into(&args, &SHARED, &mut pv, &mut pg)
            .expect("pinned launch");
        // One pinned chunk per chunk of the launch (a few thousand elements are one chunk
        // with the runtime's chunks).
        let chunks = n.div_ceil(d.chunk_elements(&wide::ADJOINT_KERNEL)) as u64;
        let expected = if args.is_pinned() { chunks } else { 0 };
        assert_eq!(d.pinned_copies() - before, expected, "{}", d.describe());
        assert_eq!(bits(&pv), bits(&values), "values, {}", d.describe());
        assert_eq!(bits(&pg), bits(&grads), "gradients, {}", d.describe());
        assert_eq!(bits(&s.w), bits(&shared.w), "shared gradient");

        // Pinned arguments into ordinary outputs, and ordinary arguments into pinned ones.
        let (mut v2, mut g2) = (vec![0.0; n], vec![bytemuck::Zeroable::zeroed(); n]);
        kernel
            .value_and_grad_into(&args, &SHARED, &mut v2, &mut g2)
            .expect("pinned arguments");
        assert_eq!((bits(&v2), bits(&g2)), (bits(&values), bits(&grads)));
        pv.fill(0.0);
        pg.fill(bytemuck::Zeroable::zeroed());
        kernel
            .value_and_grad_into(&ordinary, &SHARED, &mut pv, &mut pg)
            .expect("pinned outputs");
        assert_eq!((bits(&pv), bits(&pg)), (bits(&values), bits(&grads)));

        // Parts of pinned allocations, at offsets that are not a chunk's.
        let m = n - 5;
        pv.fill(0.0);
        let before = d.pinned_copies();
        kernel
            .value_and_grad_into(
                &args[3..3 + m],
                &SHARED,
                &mut pv[1..1 + m],
                &mut pg[2..2 + m],
            )
            .expect("pinned parts");
        assert_eq!(bits(&pv[1..1 + m]), bits(&values[3..3 + m]));
        assert_eq!(bits(&pg[2..2 + m]), bits(&grads[3..3 + m]));
        assert_eq!(pv[0], 0.0, "a word outside the part is untouched");
        let chunks = m.div_ceil(d.chunk_elements(&wide::ADJOINT_KERNEL)) as u64;
        let expected = if args.is_pinned() { chunks } else { 0 };
        assert_eq!(d.pinned_copies() - before, expected, "{}", d.describe());
    }
}

#[test]
fn writes_and_reads_through_pinned_memory_round_trip() {
    let own = own_gpu();
    for d in own.iter().chain([&Device::cpu()]) {
        // Past the transfer path's piece of 32 MiB, and a tail.
        let words = (40 << 20) / 4 + 3;
        let mut host: Pinned<u32> = d.pinned(words).expect("pinned words");
        for (i, w) in host.iter_mut().enumerate() {
            *w = (i as u32).wrapping_mul(2_654_435_761);
        }
        let expected = host.to_vec();
        let buffer = d.zeros::<u32>(words).expect("buffer");
        let before = d.pinned_copies();
        d.write(&buffer, &host).expect("write from pinned memory");
        // The write has finished with the memory once it returns.
        host.fill(7);
        assert_eq!(d.read(&buffer).expect("read"), expected, "{}", d.describe());
        d.read_into(&buffer, &mut host)
            .expect("read into pinned memory");
        assert_eq!(&host[..], &expected[..]);
        let copies = if host.is_pinned() { 2 } else { 0 };
        assert_eq!(d.pinned_copies() - before, copies, "{}", d.describe());

        // A part at an odd word offset.
        let part = d.buffer(&expected[5..1005]).expect("part");
        host.fill(0);
        d.read_into(&part, &mut host[1..1001]).expect("read a part");
        assert_eq!(&host[1..1001], &expected[5..1005]);
        assert_eq!((host[0], host[1001]), (0, 0));
    }
}

#[test]
fn pinned_memory_starts_zeroed_and_a_size_past_memory_is_an_error() {
    for d in [device(), &Device::cpu()] {
        let zeros: Pinned<[f32; 3]> = d.pinned(1000).expect("pinned");
        assert!(zeros.iter().all(|r| *r == [0.0; 3]));
        let empty: Pinned<f32> = d.pinned(0).expect("empty");
        assert!(empty.is_empty());
        match d.pinned::<[f32; 4]>(usize::MAX / 8) {
            Err(Error::Unsupported(message)) => assert!(message.contains("do not fit")),
            other => panic!("expected an error, got {:?}", other.map(|p| p.len())),
        }
    }
}

/// A vector result: its Jacobian launch into pinned slices.
#[differentiable]
pub fn polar(r: f32, theta: f32) -> [f32; 2] {
    [r * theta.cos(), r * theta.sin()]
}

/// A tuple result, whose values are written as its words.
#[differentiable]
pub fn split(a: f32, b: [f32; 2]) -> (f32, [f32; 2]) {
    (a * b[0], [b[1].sin(), a + b[0] * b[1]])
}

#[test]
fn jacobian_launches_write_into_pinned_and_ordinary_slices_alike() {
    let small = small_chunks();
    for d in small.iter().chain([device(), &Device::cpu()]) {
        let n = 3000;
        let args: Vec<polar::Args> = (0..n)
            .map(|i| polar::Args {
                r: 0.5 + (i % 13) as f32 * 0.1,
                theta: (i % 29) as f32 * 0.2 - 3.0,
            })
            .collect();
        let kernel = polar::kernel(d);
        let (values, jacobians) = kernel.value_and_jacobian(&args).expect("launch");
        let mut pv: Pinned<[f32; 2]> = d.pinned(n).expect("pinned values");
        let mut pj: Pinned<polar::Jacobian> = d.pinned(n).expect("pinned Jacobians");
        kernel
            .value_and_jacobian_into(&args, &mut pv, &mut pj)
            .expect("into pinned slices");
        assert_eq!(bits(&pv), bits(&values), "values, {}", d.describe());
        assert_eq!(bits(&pj), bits(&jacobians), "Jacobians, {}", d.describe());
        // Ordinary slices, against the CPU reverse mode (`value_and_jacobian` launches
        // through `value_and_jacobian_into`); and a length that is not the batch's.
        let mut ov = vec![[0.0f32; 2]; n];
        let mut oj = vec![bytemuck::Zeroable::zeroed(); n];
        kernel
            .value_and_jacobian_into(&args, &mut ov, &mut oj)
            .expect("into ordinary slices");
        let (cv, cj): (Vec<_>, Vec<_>) = args.iter().map(polar::value_and_jacobian).unzip();
        near_cpu(&ov, &cv, "values");
        near_cpu(&oj, &cj, "Jacobians");
        match kernel.value_and_jacobian_into(&args, &mut ov[1..], &mut oj) {
            Err(Error::ShapeMismatch { .. }) => {}
            other => panic!("expected a shape mismatch, got {other:?}"),
        }

        let args: Vec<split::Args> = (0..n)
            .map(|i| split::Args {
                a: (i % 7) as f32 * 0.3,
                b: [0.25 + (i % 5) as f32, -1.0 + (i % 3) as f32],
            })
            .collect();
        let kernel = split::kernel(d);
        let (values, jacobians) = kernel.value_and_jacobian(&args).expect("launch");
        let mut pv: Pinned<[f32; 3]> = d.pinned(n).expect("pinned values");
        let mut pj: Pinned<split::Jacobian> = d.pinned(n).expect("pinned Jacobians");
        kernel
            .value_and_jacobian_into(&args, &mut pv, &mut pj)
            .expect("into pinned slices");
        for (words, (a, b)) in pv.iter().zip(&values) {
            assert_eq!(words.map(f32::to_bits), [*a, b[0], b[1]].map(f32::to_bits));
        }
        assert_eq!(bits(&pj), bits(&jacobians), "Jacobians, {}", d.describe());
    }
}

/// A Hessian launch, with and without `#[shared]` arguments.
#[differentiable]
pub fn bowl(p: [f32; 3]) -> f32 {
    p[0] * p[0] * p[1] + p[2].sin() * p[1]
}

#[differentiable]
pub fn tilted(p: [f32; 2], #[shared] w: [f32; 2]) -> f32 {
    (p[0] * w[0] + p[1] * w[1]).tanh() * p[0]
}

#[test]
fn hessian_launches_write_into_pinned_slices() {
    let own = own_gpu();
    for d in own.iter().chain([&Device::cpu()]) {
        let n = 2000;
        let args: Vec<bowl::Args> = (0..n)
            .map(|i| bowl::Args {
                p: [
                    (i % 7) as f32 * 0.2,
                    1.0 - (i % 3) as f32,
                    (i % 11) as f32 * 0.1,
                ],
            })
            .collect();
        let kernel = bowl::kernel(d);
        let (values, grads, hessians) = kernel.value_grad_hessian(&args).expect("launch");
        let mut pv: Pinned<f32> = d.pinned(n).expect("pinned values");
        let mut pg: Pinned<bowl::Grad> = d.pinned(n).expect("pinned gradients");
        let mut ph: Pinned<bowl::Hessian> = d.pinned(n).expect("pinned Hessians");
        kernel
            .value_grad_hessian_into(&args, &mut pv, &mut pg, &mut ph)
            .expect("into pinned slices");
        assert_eq!(bits(&pv), bits(&values), "values, {}", d.describe());
        assert_eq!(bits(&pg), bits(&grads), "gradients, {}", d.describe());
        assert_eq!(bits(&ph), bits(&hessians), "Hessians, {}", d.describe());

        let args: Vec<tilted::Args> = (0..n)
            .map(|i| tilted::Args {
                p: [(i % 5) as f32 * 0.3 - 0.6, (i % 9) as f32 * 0.1],
            })
            .collect();
        let shared = tilted::Shared { w: [0.7, -0.4] };
        let kernel = tilted::kernel(d);
        let (values, grads, hessians) = kernel.value_grad_hessian(&args, &shared).expect("launch");
        // Against the CPU reverse mode, element by element.
        let cpu: Vec<_> = args
            .iter()
            .map(|a| tilted::value_grad_hessian(a, &shared))
            .collect();
        near_cpu(
            &values,
            &cpu.iter().map(|c| c.0).collect::<Vec<_>>(),
            "values",
        );
        near_cpu(
            &grads,
            &cpu.iter().map(|c| c.1).collect::<Vec<_>>(),
            "gradients",
        );
        near_cpu(
            &hessians,
            &cpu.iter().map(|c| c.2).collect::<Vec<_>>(),
            "Hessians",
        );
        // Into pinned slices: the same bits.
        let mut pv: Pinned<f32> = d.pinned(n).expect("pinned values");
        let mut pg: Pinned<tilted::Grad> = d.pinned(n).expect("pinned gradients");
        let mut ph: Pinned<tilted::Hessian> = d.pinned(n).expect("pinned Hessians");
        kernel
            .value_grad_hessian_into(&args, &shared, &mut pv, &mut pg, &mut ph)
            .expect("into pinned slices");
        assert_eq!((bits(&pv), bits(&pg)), (bits(&values), bits(&grads)));
        assert_eq!(bits(&ph), bits(&hessians), "Hessians, {}", d.describe());
    }
}
