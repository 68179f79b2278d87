// Hand-written: the workgroup sum of 8 shared-gradient words, in a fixed order (4 barriers;
// the generated kernels' tree takes 9). `stage[k * 256 + lane]` holds lane's word k; the
// sums go to shared_partials[group * words + base + k] for k < count.
var<workgroup> stage: array<f32, 2048>;

fn reduce8(lid: u32, group: u32, words: u32, base: u32, count: u32) {
    workgroupBarrier();
    // Level 1: thread (k, s) sums lanes s, s + 32, ..., s + 224 of word k (a warp reads
    // 32 consecutive words: no bank conflicts) into lane s.
    let k = lid / 32u;
    let s = lid % 32u;
    var acc = 0.0f;
    for (var j = 0u; j < 8u; j++) {
        acc += stage[k * 256u + s + 32u * j];
    }
    stage[k * 256u + s] = acc;
    workgroupBarrier();
    // Level 2: 32 threads, (k, q) sums lanes q, q + 4, ..., q + 28 into lane q.
    if (lid < 32u) {
        let k2 = lid / 4u;
        let q = lid % 4u;
        var a = 0.0f;
        for (var j = 0u; j < 8u; j++) {
            a += stage[k2 * 256u + q + 4u * j];
        }
        stage[k2 * 256u + q] = a;
    }
    workgroupBarrier();
    if (lid < count) {
        let b = lid * 256u;
        shared_partials[group * words + base + lid] = (stage[b] + stage[b + 1u]) + (stage[b + 2u] + stage[b + 3u]);
    }
    // The next group's stores wait until these reads are done.
    workgroupBarrier();
}
