// A gathered argument's block holds rows of the argument's own type: a block of [f32; 2]
// rows bound to a [f32; 3] argument does not compile.
use gradfuse::{Device, Source, differentiable};

#[differentiable]
pub fn edge(p: [f32; 3], q: [f32; 3]) -> f32 {
    (q[0] - p[0]) * (q[1] - p[1]) * (q[2] - p[2])
}

fn main() {
    let d = Device::cpu();
    let flat = d.buffer(&[[0.0f32; 2]; 4]).unwrap();
    let vertices = d.buffer(&[[0.0f32; 3]; 4]).unwrap();
    let index = d.index(&[0, 1, 2], 4).unwrap();
    let _ = edge::Sources {
        p: Source::Gather(&flat, &index),
        q: Source::Gather(&vertices, &index),
    };
}
