"""WGSL text the hand-written network kernels (blocked.py, blocked2.py, coop_net.py) share
with each other and with the generated kernels."""
import os

def bindings(shared_vec4s):
    """The generated adjoint's parameters and bindings, `shared_vec4s` vec4s of shared words."""
    return '''struct Params {
    n: u32,
    per_thread: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, %d>;
@group(0) @binding(5) var<storage, read_write> shared_partials: array<f32>;
''' % shared_vec4s

def gf_tanh():
    """`gf_tanh`, as the generated kernels compute it: benches/hand/tanh.wgsl's
    `tanh_accurate`, renamed."""
    path = os.path.join(os.path.dirname(__file__), '..', '..', 'hand', 'tanh.wgsl')
    text = open(path).read()
    return text[text.index('fn tanh_accurate'):].replace('tanh_accurate', 'gf_tanh')
