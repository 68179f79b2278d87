# writes benches/networks/variants/wide_networks.rs: two hidden layers of 65 to 128 rows,
# the cooperative adjoint that streams W2 in blocks (BENCHMARKS.md, "Two layers of 128 rows").
import sys, os
sys.path.insert(0, os.path.dirname(__file__))
from shape_networks_lib import net
nets = [("net128", [8,128,128,1], "tanh"), ("net128_relu", [8,128,128,1], "relu"),
        ("net96", [8,96,96,1], "tanh"), ("coord128", [3,128,128,1], "tanh"),
        ("two_out_128", [16,128,128,2], "tanh"), ("three_out_128", [8,128,128,3], "tanh"),
        ("four_out_128", [16,128,128,4], "tanh")]
print("// Networks of two hidden layers of 65 to 128 rows, written as users write them, for the\n// corpus bench: GRADFUSE_CORPUS_EXTRA=benches/networks/variants/wide_networks.rs\n// (BENCHMARKS.md, \"Two layers of 128 rows\"). Written by benches/networks/variants/wide_networks.py.")
for n, l, a in nets:
    src = net(n, l)
    if a == "relu":
        src = src.replace(".tanh()", ".max(0.0)")
    print(src)
