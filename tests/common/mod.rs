//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use gradfuse::Device;
use std::sync::OnceLock;

pub mod compiled;
pub mod networks;
pub mod shared_adjoint;
pub mod sizes;

/// One device for the whole test binary: the GPU when there is one (lavapipe in CI, where
/// `GRADFUSE_REQUIRE_GPU=1` makes a missing GPU a failure), else the CPU fallback.
pub fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(|| match Device::auto() {
        Ok(d) => {
            // Every test of a binary launches on this one device, in parallel: on lavapipe
            // with 2 cores a launch waits behind the other tests' work (and their shaders'
            // compilation), which has passed the 60 s default. The limit is for hung
            // devices; `tests/faults.rs` tests it on a device of its own.
            d.set_timeout(std::time::Duration::from_secs(600));
            // lavapipe reports 32 KiB of workgroup memory and runs the cooperative network
            // kernels' 48 KiB (its workgroup memory is the host's): the tests run those
            // kernels there as a GPU of 48 KiB does, and `a_gpu_of_less_workgroup_memory_*`
            // the fallbacks a smaller one runs.
            if d.is_software_gpu() {
                d.set_workgroup_bytes(gradfuse_shaders_gen::emit_wgsl::NETWORK_WORKGROUP_BYTES);
            }
            d
        }
        Err(e) => panic!("no device for the GPU tests: {e}"),
    })
}

/// Fails with every failure listed (the first 40), and the device they happened on.
pub fn assert_none(failures: &[String]) {
    let shown = failures.len().min(40);
    assert!(
        failures.is_empty(),
        "{} on {} (first {shown}):\n{}",
        failures.len(),
        device().describe(),
        failures[..shown].join("\n")
    );
}

/// A GPU device of the test's own, for a test that changes a device's settings (or
/// breaks it); `None` where there is no GPU and `GRADFUSE_REQUIRE_GPU` does not ask for one.
pub fn own_gpu() -> Option<Device> {
    match Device::gpu() {
        Ok(d) => Some(d),
        Err(e) if std::env::var(gradfuse::REQUIRE_GPU_ENV).is_ok_and(|v| v == "1") => {
            panic!("GRADFUSE_REQUIRE_GPU=1 and no GPU: {e}")
        }
        Err(e) => {
            println!("no GPU ({e}): this test needs one of its own");
            None
        }
    }
}

/// A small deterministic generator (SplitMix64), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`, rounded to f32 (inputs are f32, the oracle sees the same).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f32 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (lo + (hi - lo) * u) as f32
    }
}

/// The largest error of `got` against `want`, relative to the larger of each component
/// and the largest component of `want` scaled by `floor`: a gradient component that is
/// tiny next to the others is held to the precision the others allow, not to its own.
pub fn rel_error(got: &[f64], want: &[f64], floor: f64) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())) * floor;
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            if g == w {
                0.0
            } else {
                (g - w).abs() / w.abs().max(scale).max(1e-30)
            }
        })
        .fold(0.0, f64::max)
}

/// Parses and validates a generated WGSL module with naga, panicking with naga's report.
pub fn validate_wgsl(name: &str, src: &str) {
    validate_wgsl_with(name, src, naga::valid::Capabilities::empty());
}

/// [`validate_wgsl`] of a module computing in f64.
pub fn validate_wgsl_f64(name: &str, src: &str) {
    validate_wgsl_with(name, src, naga::valid::Capabilities::FLOAT64);
}

fn validate_wgsl_with(name: &str, src: &str, capabilities: naga::valid::Capabilities) {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| {
        panic!(
            "{name}: naga cannot parse the WGSL: {}\n{src}",
            e.emit_to_string(src)
        )
    });
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: naga rejects the WGSL: {e:?}\n{src}"));
}

/// The devices an f64 test runs on: the CPU device, and the GPU where it has 64-bit floats
/// in shaders (else it says so).
pub fn f64_devices() -> Vec<&'static Device> {
    static CPU: OnceLock<Device> = OnceLock::new();
    let mut d = vec![CPU.get_or_init(Device::cpu)];
    if device().has_f64() {
        d.push(device());
    } else {
        eprintln!(
            "{}: no 64-bit floats in shaders; CPU only",
            device().describe()
        );
    }
    d
}

/// Defines items and keeps their source text in a `const`, for the f64 oracle.
#[macro_export]
macro_rules! with_source {
    ($src:ident, $($item:tt)*) => {
        $($item)*
        const $src: &str = stringify!($($item)*);
    };
}

/// The interpreter's input words of an element `a` and the shared words `s` of a kernel's
/// typed arguments: the element's words in order (its constants among them), then the
/// shared ones.
pub fn words_of<A: bytemuck::Pod, S: bytemuck::Pod>(a: &A, s: &S) -> Vec<f64> {
    bytemuck::cast_slice::<_, f32>(std::slice::from_ref(a))
        .iter()
        .chain(bytemuck::cast_slice::<_, f32>(std::slice::from_ref(s)))
        .map(|v| *v as f64)
        .collect()
}

/// Solves `A x = b` (dense, f64) by Gaussian elimination with partial pivoting.
pub fn solve_dense(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap();
        a.swap(c, p);
        b.swap(c, p);
        let (top, rest) = a.split_at_mut(c + 1);
        for (i, row) in rest.iter_mut().enumerate() {
            let f = row[c] / top[c][c];
            for (x, p) in row[c..].iter_mut().zip(&top[c][c..]) {
                *x -= f * p;
            }
            b[c + 1 + i] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[i][k] * x[k]).sum();
        x[i] = (b[i] - s) / a[i][i];
    }
    x
}

/// Central differences of the f64 interpreter of `src`'s lowered function at `words`, in
/// the words listed.
pub fn central_differences(src: &str, words: &[f64], which: &[usize]) -> (f64, Vec<f64>) {
    let c = gradfuse_shaders_gen::compile_str(src).expect("the source compiles");
    let f = &c.lowered.primal;
    let value = gradfuse_shaders_gen::interp::eval(f, words)[0];
    let grads = which
        .iter()
        .map(|&w| {
            let h = 1e-6 * words[w].abs().max(1.0);
            let (mut plus, mut minus) = (words.to_vec(), words.to_vec());
            plus[w] += h;
            minus[w] -= h;
            (gradfuse_shaders_gen::interp::eval(f, &plus)[0]
                - gradfuse_shaders_gen::interp::eval(f, &minus)[0])
                / (2.0 * h)
        })
        .collect();
    (value, grads)
}
