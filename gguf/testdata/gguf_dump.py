#!/usr/bin/env python3
"""Dump GGUF files with the independent `gguf` Python package (llama.cpp's
gguf-py), for gguf/python_test.go to compare against moonlm's reader.

Usage: gguf_dump.py FILE...   (one JSON object per line per file)

Per file: version, alignment, data_offset; every metadata key in file order
with its type and value (arrays: element type, count, the first few values
and a SHA-256 of the elements as parsed: for strings the u64 length and
bytes of each, for numbers their little-endian bytes); every tensor with
name, type id, shape (ggml order), absolute data offset and byte size.
"""
import hashlib
import json
import math
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as VT

HEAD = 8  # decoded values listed per array


class Reader(gguf.GGUFReader):
    """GGUFReader with a faster primitive read: the package's _get slices an
    np.memmap (slow per call); this slices a plain view of the same bytes
    with the same dtype and byte order. All parsing logic stays the
    package's."""

    def _get(self, offset, dtype, count=1, override_order=None):
        count = int(count)
        dt = np.dtype(dtype)
        raw = self.__dict__.get('_raw')
        if raw is None:
            raw = np.asarray(self.data).view(np.ndarray)
            self.__dict__['_raw'] = raw
        arr = raw[offset:offset + dt.itemsize * count].view(dt)[:count]
        order = self.byte_order if override_order is None else override_order
        return arr.view(arr.dtype.newbyteorder(order))


def jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return 'nan' if math.isnan(v) else ('inf' if v > 0 else '-inf')
    if isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def dump_field(f):
    main = f.types[0]
    out = {'key': f.name, 'type': main.name}
    if main != VT.ARRAY:
        if main == VT.STRING:
            out['value'] = f.parts[-1].tobytes().decode('utf-8', errors='replace')
            out['utf8'] = _is_utf8(f.parts[-1].tobytes())
        else:
            out['value'] = jsonable(f.parts[-1].tolist()[0])
        return out
    # parts: key length, key bytes, value type, element type, count, ...
    out['count'] = int(f.parts[4][0])
    if len(f.types) < 2:
        out['elem'] = None  # empty array: the package records no element type
        out['elem_id'] = int(f.parts[3][0])
        return out
    sub = f.types[1]
    out['elem'] = sub.name
    if sub == VT.ARRAY:
        return out  # the package flattens nested arrays; compare count only
    h = hashlib.sha256()
    head = []
    for i, idx in enumerate(f.data):
        part = f.parts[idx]
        if sub == VT.STRING:
            b = part.tobytes()
            h.update(len(b).to_bytes(8, 'little'))
            h.update(b)
            if i < HEAD:
                head.append(b.decode('utf-8', errors='replace'))
        else:
            h.update(part.astype(part.dtype.newbyteorder('<')).tobytes())
            if i < HEAD:
                head.append(jsonable(part.tolist()[0]))
    out['sha256'] = h.hexdigest()
    out['head'] = head
    return out


def _is_utf8(b):
    try:
        b.decode('utf-8')
        return True
    except UnicodeDecodeError:
        return False


def dump(path):
    r = Reader(path)
    version = int(r.fields['GGUF.version'].parts[0][0])
    kv = [dump_field(f) for name, f in r.fields.items() if not name.startswith('GGUF.')]
    tensors = [{
        'name': t.name,
        'type': int(t.tensor_type),
        'shape': [int(d) for d in t.shape],
        'offset': int(t.data_offset),
        'bytes': int(t.n_bytes),
    } for t in r.tensors]
    return {'path': path, 'version': version, 'alignment': int(r.alignment),
            'data_offset': int(r.data_offset), 'kv': kv, 'tensors': tensors}


def main():
    for path in sys.argv[1:]:
        try:
            obj = dump(path)
        except Exception as e:  # reported, so the Go test can say which file
            obj = {'path': path, 'error': f'{type(e).__name__}: {e}'}
        print(json.dumps(obj), flush=True)


if __name__ == '__main__':
    main()
