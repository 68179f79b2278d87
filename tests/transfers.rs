//! Uploads and readbacks of device buffers: sizes that end inside a staging piece, span
//! several pieces and more pieces than are kept in flight, reads into the caller's memory,
//! and ordering with recorded work; on the GPU and on the CPU device. Large uploads staged
//! in host memory and in wgpu's mapped buffers give the same words.

mod common;

use common::device;
use gradfuse::{Device, Error};

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
    // A device of its own: the switch is the device's.
    let d = Device::gpu().expect("a GPU adapter");
    if d.describe().contains("Vulkan") {
        assert!(d.has_host_staging(), "{}", d.describe());
    }
    // Round trips of every size but the largest stage in wgpu's mapped buffers; the
    // largest (128 MiB and 12 bytes) in host memory when on.
    for on in [true, false, true] {
        d.set_host_staging(on);
        round_trips(&d);
        let buffer = d.zeros::<u32>(WORDS).unwrap();
        for round in 0..2u32 {
            let host = pattern(WORDS, round + 10);
            d.write(&buffer, &host).unwrap();
            assert_eq!(
                d.read(&buffer).unwrap(),
                host,
                "round {round}, host staging {on}"
            );
        }
    }
}
