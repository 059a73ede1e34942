#!/usr/bin/env python3
"""safetensors files laid out as other tools lay them out, and their values,
for the tests (json and struct only: no numpy, no hsr code).

  st_relayout.py relayout IN OUT [--seed N] [--bf16-every K]
      writes IN's tensors to OUT with the header in one shuffled order, the
      bytes in another (so header neighbours are apart, other tensors between
      them), __metadata__ last, and every Kth tensor (by name) as BF16
      (rounded to nearest even, as torch does)
  st_relayout.py shard IN DIR [--files N] [--seed N] [--bf16-every K]
      Hugging Face's sharded form in DIR: N shards, each laid out as
      relayout lays a file out, and model.safetensors.index.json
  st_relayout.py same A B
      A and B (a file, an index or a directory holding one) hold the same
      names and shapes, and every value of A equals B's bit for bit, both
      widened to f32 (F32, BF16 or F16)
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


def write_file(dst, names, body, meta, rng):
    """names' tensors (body: name -> (dtype, shape, bytes)) to dst: the bytes in
    one shuffled order, the header in another, __metadata__ last."""
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
    head["__metadata__"] = meta
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(buf))
    return len(buf)


def converted(src, bf16_every):
    ts = ckpt_read.safetensors(src)
    names = sorted(ts)
    conv = {n for i, n in enumerate(names) if bf16_every and i % bf16_every == bf16_every - 1}
    body = {}
    for n in names:
        dtype, shape, data = ts[n]
        body[n] = ("BF16", shape, to_bf16(data)) if n in conv else (dtype, shape, data)
    return names, body, len(conv)


def relayout(src, dst, seed, bf16_every):
    names, body, nconv = converted(src, bf16_every)
    write_file(dst, names, body, metadata(src), random.Random(seed))
    print(f"st_relayout: {dst}: {len(names)} tensors, {nconv} as BF16, header and data in two other orders")


def shard(src, d, files, seed, bf16_every):
    """Hugging Face's sharded form in directory d: `files` shards (tensors
    dealt out in a shuffled order), each laid out as relayout does, and
    model.safetensors.index.json."""
    names, body, nconv = converted(src, bf16_every)
    rng = random.Random(seed)
    order = names[:]
    rng.shuffle(order)
    os.makedirs(d, exist_ok=True)
    fname = [f"model-{k + 1:05d}-of-{files:05d}.safetensors" for k in range(files)]
    groups = [order[k::files] for k in range(files)]
    total = sum(write_file(os.path.join(d, fname[k]), groups[k], body, metadata(src), rng) for k in range(files))
    wmap = {n: fname[k] for k in range(files) for n in groups[k]}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)
    print(f"st_relayout: {d}: {len(names)} tensors in {files} shards, {nconv} as BF16, each laid out in two other orders")


def tensors_of(path):
    """A file, an index (.json) or a directory holding one: name -> (dtype, shape, bytes)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors.index.json")
    if not path.endswith(".json"):
        return ckpt_read.safetensors(path)
    d = os.path.dirname(path)
    index = json.load(open(path))
    out, total = {}, 0
    for f in sorted(set(index["weight_map"].values())):
        part = ckpt_read.safetensors(os.path.join(d, f))
        assert all(index["weight_map"].get(n) == f for n in part), f"{f} holds tensors the index puts elsewhere"
        total += sum(len(v[2]) for v in part.values())
        out.update(part)
    assert sorted(out) == sorted(index["weight_map"]), "the index names tensors no shard holds"
    assert total == index["metadata"]["total_size"], f"total_size {index['metadata']['total_size']}, the shards {total}"
    return out


def same(a, b):
    ta, tb = tensors_of(a), tensors_of(b)
    assert sorted(ta) == sorted(tb), f"names differ: {sorted(set(ta) ^ set(tb))}"
    for n in sorted(ta):
        (da, sa, xa), (db, sb, xb) = ta[n], tb[n]
        assert sa == sb, f"{n}: shape {sa} in {a}, {sb} in {b}"
        va, vb = f32_bits(da, xa), f32_bits(db, xb)
        bad = [i for i in range(len(va)) if va[i] != vb[i]]
        assert not bad, (f"{n}: {len(bad)} of {len(va)} values differ, first at element {bad[0]}: "
                         f"{va[bad[0]]:#010x} in {a}, {vb[bad[0]]:#010x} in {b}")
    print(f"st_relayout: {b} holds {a}'s {len(ta)} tensors, bit for bit")


def main(argv):
    if len(argv) >= 3 and argv[0] == "relayout":
        opt = dict(zip(argv[3::2], argv[4::2]))
        relayout(argv[1], argv[2], int(opt.get("--seed", 1)), int(opt.get("--bf16-every", 0)))
    elif len(argv) >= 3 and argv[0] == "shard":
        opt = dict(zip(argv[3::2], argv[4::2]))
        shard(argv[1], argv[2], int(opt.get("--files", 3)), int(opt.get("--seed", 1)), int(opt.get("--bf16-every", 0)))
    elif len(argv) == 3 and argv[0] == "same":
        same(argv[1], argv[2])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
