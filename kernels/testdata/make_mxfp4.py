#!/usr/bin/env python3
"""Write mxfp4.json: MXFP4 test vectors from gguf-py's implementation of
ggml's format (gguf.quants.MXFP4, which follows ggml's
dequantize_row_mxfp4 and quantize_row_mxfp4_ref).

Usage: make_mxfp4.py > mxfp4.json (needs numpy and gguf, as in the test
venv). Deterministic: the inputs come from a fixed seed.
"""
import json

import numpy as np
from gguf import quants, GGMLQuantizationType

rng = np.random.default_rng(39)
# Dequantization: random blocks, every scale byte 0..255 among them, and
# every code.
nb = 256
raw = rng.integers(0, 256, size=(nb, 17), dtype=np.uint8)
raw[:, 0] = np.arange(nb, dtype=np.uint8)
deq = quants.dequantize(raw.reshape(-1), GGMLQuantizationType.MXFP4)
# Quantization: values over many magnitudes, zeros, ties between codes,
# exact powers of two.
vals = (rng.standard_normal((64, 32)) * np.exp2(rng.integers(-20, 20, size=(64, 1)))).astype(np.float32)
vals[0] = 0
vals[1] = np.float32(2.0) ** np.arange(-16, 16, dtype=np.float32)
vals[2] = np.linspace(-6, 6, 32, dtype=np.float32)
vals[3] = np.float32(0.25) * np.arange(32, dtype=np.float32)
q = quants.quantize(vals, GGMLQuantizationType.MXFP4)
print(json.dumps({
    "blocks": raw.reshape(-1).tolist(),
    "dequant": [float(x).hex() for x in deq.reshape(-1).astype(np.float32)],
    "values": [float(x).hex() for x in vals.reshape(-1)],
    "quant": np.asarray(q, dtype=np.uint8).reshape(-1).tolist(),
}))
