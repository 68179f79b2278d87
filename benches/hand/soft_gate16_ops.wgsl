// The 16 relaxed two-input logic functions (real-valued: a AND b is a * b).
fn gate_ops(a: f32, b: f32) -> array<f32, 16> {
    let ab = a * b;
    return array<f32, 16>(
        0.0, ab, a - ab, a, b - ab, b, a + b - 2.0 * ab, a + b - ab,
        1.0 - (a + b - ab), 1.0 - (a + b - 2.0 * ab), 1.0 - b, 1.0 - b + ab,
        1.0 - a, 1.0 - a + ab, 1.0 - ab, 1.0,
    );
}

// Their derivatives in a (in b by symmetry: swap a and b, and entries 2 <-> 4, 3 <-> 5,
// 10 <-> 12, 11 <-> 13).
fn gate_ops_da(a: f32, b: f32) -> array<f32, 16> {
    return array<f32, 16>(
        0.0, b, 1.0 - b, 1.0, -b, 0.0, 1.0 - 2.0 * b, 1.0 - b,
        b - 1.0, 2.0 * b - 1.0, 0.0, b, -1.0, b - 1.0, -b, 0.0,
    );
}

fn gate_ops_db(a: f32, b: f32) -> array<f32, 16> {
    return array<f32, 16>(
        0.0, a, -a, 0.0, 1.0 - a, 1.0, 1.0 - 2.0 * a, 1.0 - a,
        a - 1.0, 2.0 * a - 1.0, -1.0, a - 1.0, 0.0, a, -a, 0.0,
    );
}
