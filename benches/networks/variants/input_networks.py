# writes benches/networks/variants/input_networks.rs: networks of 10 to 32 inputs, whose
# first layer's gradient d_W1 is a product of the workgroup at 128 rows (BENCHMARKS.md,
# "Networks of many inputs"); the 64-row ones for variants of that kernel.
import sys, os
sys.path.insert(0, os.path.dirname(__file__))
from shape_networks_lib import net
nets = [("in32_128", [32,128,128,1], "tanh"), ("in32_128_relu", [32,128,128,1], "relu"),
        ("in24_128_2", [24,128,128,2], "tanh"), ("in20_100", [20,100,100,1], "tanh"),
        ("in16_128", [16,128,128,1], "tanh"), ("in32_64", [32,64,64,1], "tanh"),
        ("in16_64", [16,64,64,1], "tanh"), ("in12_128", [12,128,128,1], "tanh"),
        ("in10_128", [10,128,128,1], "tanh"), ("in14_128", [14,128,128,1], "tanh")]
print("// Networks of 10 to 32 inputs, written as users write them, for the corpus bench:\n// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/input_networks.rs (BENCHMARKS.md,\n// \"Networks of many inputs\"). Written by benches/networks/variants/input_networks.py.")
for n, l, a in nets:
    src = net(n, l)
    if a == "relu":
        src = src.replace(".tanh()", ".max(0.0)")
    print(src)
