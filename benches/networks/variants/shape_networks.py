# writes benches/networks/variants/shape_networks.rs
import sys
import os
sys.path.insert(0, os.path.dirname(__file__))
from shape_networks_lib import net
nets = [("net16", [8,16,16,1]), ("net24", [8,24,24,1]), ("net40", [8,40,40,1]), ("net48", [8,48,48,1]), ("net128", [8,128,128,1]),
        ("four_out_128", [16,128,128,4]), ("deep32", [8,32,32,32,1]), ("deep64", [8,64,64,64,1]),
        ("shallow64", [8,64,1]), ("shallow128", [8,128,1]),
        ("funnel_64_32", [8,64,32,1]), ("funnel_32_64", [8,32,64,1]), ("funnel_64_16", [8,64,16,1]),
        ("funnel_16_64", [8,16,64,1]), ("funnel_48_24", [8,48,24,1]), ("funnel_64_48", [8,64,48,1]),
        ("deep32x4", [8,32,32,32,32,1]), ("deep24", [8,24,24,24,1]), ("deep_coord32", [3,32,32,32,1])]
print("// Tanh networks of shapes other than the bench's I-32-32-O and I-64-64-O (other widths, one,\n// three and four hidden layers), written as users write them, for the corpus bench:\n// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/shape_networks.rs (BENCHMARKS.md,\n// \"Networks of other shapes\"). Written by benches/networks/variants/shape_networks.py.")
for n, l in nets:
    print(net(n, l))
