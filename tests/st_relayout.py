#!/usr/bin/env python3
"""safetensors files laid out as other tools lay them out, and their values,
for the tests (json and struct only: no numpy, no hsr code).

  st_relayout.py relayout IN OUT [--seed N] [--bf16-every K]
      writes IN's tensors to OUT with the header in one shuffled order, the
      bytes in another (so header neighbours are apart, other tensors between
      them), __metadata__ last, and every Kth tensor (by name) as BF16
      (rounded to nearest even, as torch does)
  st_relayout.py same A B
      A and B hold the same names and shapes, and every value of A (F32,
      BF16 or F16, widened to f32) equals B's F32 value bit for bit
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_read  # noqa: E402  (the specification's parser)

ckpt_read.ST_DTYPES.setdefault("BF16", ("H", 2))
ckpt_read.ST_DTYPES.setdefault("F16", ("e", 2))


def f32_bits(dtype, data):
    """The values as f32 bit patterns."""
    if dtype == "F32":
        return list(struct.unpack(f"<{len(data) // 4}I", data))
    if dtype == "BF16":
        return [h << 16 for h in struct.unpack(f"<{len(data) // 2}H", data)]
    if dtype == "F16":
        return [struct.unpack("<I", struct.pack("<f", v))[0] for v in struct.unpack(f"<{len(data) // 2}e", data)]
    raise AssertionError(f"dtype {dtype}: not a float the tests use")


def to_bf16(data):
    out = []
    for u in struct.unpack(f"<{len(data) // 4}I", data):
        assert (u >> 23) & 0xFF != 0xFF, "a non-finite weight"
        out.append((u + 0x7FFF + ((u >> 16) & 1)) >> 16)
    return struct.pack(f"<{len(out)}H", *out)


def metadata(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    return json.loads(raw[8:8 + n].decode("utf-8")).get("__metadata__", {})


def relayout(src, dst, seed, bf16_every):
    ts = ckpt_read.safetensors(src)
    names = sorted(ts)
    rng = random.Random(seed)
    conv = {n for i, n in enumerate(names) if bf16_every and i % bf16_every == bf16_every - 1}
    body = {}
    for n in names:
        dtype, shape, data = ts[n]
        body[n] = ("BF16", shape, to_bf16(data)) if n in conv else (dtype, shape, data)
    stored = names[:]
    rng.shuffle(stored)
    listed = names[:]
    while len(names) > 2 and (listed == stored or listed == names):
        rng.shuffle(listed)
    at, offs, buf = 0, {}, bytearray()
    for n in stored:
        offs[n] = (at, at + len(body[n][2]))
        buf += body[n][2]
        at += len(body[n][2])
    head = {n: {"dtype": body[n][0], "shape": body[n][1], "data_offsets": list(offs[n])} for n in listed}
    head["__metadata__"] = metadata(src)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(buf))
    print(f"st_relayout: {dst}: {len(names)} tensors, {len(conv)} as BF16, header and data in two other orders")


def same(a, b):
    ta, tb = ckpt_read.safetensors(a), ckpt_read.safetensors(b)
    assert sorted(ta) == sorted(tb), f"names differ: {sorted(set(ta) ^ set(tb))}"
    for n in sorted(ta):
        (da, sa, xa), (db, sb, xb) = ta[n], tb[n]
        assert sa == sb, f"{n}: shape {sa} in {a}, {sb} in {b}"
        assert db == "F32", f"{n}: {b} holds {db}"
        va, vb = f32_bits(da, xa), f32_bits(db, xb)
        bad = [i for i in range(len(va)) if va[i] != vb[i]]
        assert not bad, (f"{n}: {len(bad)} of {len(va)} values differ, first at element {bad[0]}: "
                         f"{va[bad[0]]:#010x} in {a}, {vb[bad[0]]:#010x} in {b}")
    print(f"st_relayout: {b} holds {a}'s {len(ta)} tensors, bit for bit")


def main(argv):
    if len(argv) >= 3 and argv[0] == "relayout":
        opt = dict(zip(argv[3::2], argv[4::2]))
        relayout(argv[1], argv[2], int(opt.get("--seed", 1)), int(opt.get("--bf16-every", 0)))
    elif len(argv) == 3 and argv[0] == "same":
        same(argv[1], argv[2])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
