# writes benches/networks/variants/streamed_networks.rs: networks of 40 to 128 inputs,
# whose adjoint at 128 rows streams W1 through workgroup memory in blocks of its columns
# (BENCHMARKS.md, "Networks past 32 inputs"); the 32-input one, whose lanes hold their rows
# of W1 in registers, beside them.
import sys, os
sys.path.insert(0, os.path.dirname(__file__))
from shape_networks_lib import net
nets = [("in32_128", [32,128,128,1], "tanh"), ("in40_128", [40,128,128,1], "tanh"),
        ("in64_128", [64,128,128,1], "tanh"), ("in64_128_relu", [64,128,128,1], "relu"),
        ("in100_128_2", [100,128,128,2], "tanh"), ("in128_128", [128,128,128,1], "tanh")]
print("// Networks of 32 to 128 inputs, written as users write them, for the corpus bench:\n// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/streamed_networks.rs (BENCHMARKS.md,\n// \"Networks past 32 inputs\"). Written by benches/networks/variants/streamed_networks.py.")
for n, l, a in nets:
    src = net(n, l)
    if a == "relu":
        src = src.replace(".tanh()", ".max(0.0)")
    print(src)
