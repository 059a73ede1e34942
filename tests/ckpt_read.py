#!/usr/bin/env python3
"""An independent reader of hsr checkpoints and safetensors files, for the
tests (json, struct and zlib only: no numpy, no hsr code).

  ckpt_read.py compare A B [--tol X]   every tensor's master, m and v in two
                                       checkpoints: bitwise (no --tol) or
                                       within X of the largest magnitude
  ckpt_read.py latest ROOT NAME        ROOT/latest names NAME
  ckpt_read.py st-equal FILE.safetensors CKPT
                                       the file parses per the safetensors
                                       specification and each tensor equals
                                       the checkpoint's master weights
  ckpt_read.py st-meta FILE KEY=VALUE...
                                       the file's __metadata__ is exactly
                                       these pairs, in this order
  ckpt_read.py st-index DIR REF.safetensors MAX
                                       DIR is Hugging Face's sharded layout
                                       (model-0000k-of-0000N.safetensors and
                                       model.safetensors.index.json as
                                       save_pretrained writes it) of REF's
                                       tensors: every tensor's bytes equal,
                                       each in the file the weight_map names,
                                       total_size their bytes, every shard
                                       with REF's metadata and at most MAX
                                       bytes of tensors (or one tensor),
                                       filled in REF's order
  ckpt_read.py drop-model CKPT         removes the manifest's "model" (a
                                       checkpoint as hsr wrote it before
                                       checkpoints recorded their model),
                                       with its crc32 made right
  ckpt_read.py to-v1 CKPT              rewrites the manifest in format
                                       version 1 (every range listed, a
                                       number per block checksum), with its
                                       crc32 made right

A checkpoint directory (or root, through its `latest`) holds manifest.json,
whose "manifest_crc32" is the crc32 of the file with that value written as
"00000000", and data files of f32 little-endian ranges. Format version 2
records a file's block checksums as one string of 8 hex digits per block and
no ranges: they follow from the layout (units' shard_len, tensors' unit and
offset), the mesh (replicate, outer_shard) and each file's mesh coordinates
(rep, sh); version 1 lists a number per block and every tensor's ranges as
{start, count, file, master, m, v} objects.
"""
import json
import os
import struct
import sys
import zlib


def resolve(path):
    if os.path.isfile(os.path.join(path, "manifest.json")):
        return path
    name = open(os.path.join(path, "latest")).read().strip()
    return os.path.join(path, name)


def manifest(path):
    d = resolve(path)
    raw = open(os.path.join(d, "manifest.json"), "rb").read()
    key = raw.rfind(b'"manifest_crc32"')
    assert key >= 0, f"{d}: no manifest_crc32"
    q = raw.index(b'"', raw.index(b":", key + 16)) + 1
    want = raw[q:q + 8]
    zeroed = raw[:q] + b"00000000" + raw[q + 8:]
    got = b"%08x" % zlib.crc32(zeroed)
    assert got == want, f"{d}: manifest crc32 {got} != recorded {want}"
    m = json.loads(raw)
    assert m["format"] == "hsr-checkpoint" and m["format_version"] in (1, 2), m.get("format_version")
    return d, m


def block_crcs(m, f):
    b = f["block_crc32"]
    if m["format_version"] == 1:
        return b
    assert len(b) % 8 == 0 and b == b.lower(), f"{f['name']}: block_crc32 is not 8 hex digits per block"
    return [int(b[i:i + 8], 16) for i in range(0, len(b), 8)]


def part_of(T, r, R):
    return T // R * r + T % R * r // R


def all_ranges(m):
    """Every tensor's ranges (by index) as version 1's objects. Version 2
    lists none: each data file holds its rank's part of what its mesh
    coordinates (rep, sh) hold, the pieces of parameters in layout order,
    master, m and v side by side per piece (the format's definition)."""
    ts = m["tensors"]
    if m["format_version"] == 1:
        return [t["ranges"] for t in ts]
    mesh = m["mesh"]
    R, outer = mesh["replicate"], mesh["outer_shard"]
    Ls = [u["shard_len"] for u in m["units"]]
    Lo = [x // R if outer else x for x in Ls]
    by_unit = [[] for _ in Ls]
    for i, t in enumerate(ts):
        by_unit[t["unit_index"]].append(i)

    def held(u, rep, sh):  # unit u's elements (rep, sh) holds: lo, n, part, parts
        if outer:
            return sh * Ls[u] + rep * Lo[u], Lo[u], 0, 1
        return sh * Ls[u], Ls[u], rep, R

    def walk(rep, sh, clo, chi, out):
        pos = 0
        for u in range(len(Ls)):
            lo, n, _, _ = held(u, rep, sh)
            for i in by_unit[u]:
                off, numel = ts[i]["offset"], ts[i]["numel"]
                a, b = max(off, lo), min(off + numel, lo + n)
                if a >= b:
                    continue
                ca, cb = max(pos, clo), min(pos + b - a, chi)
                if ca < cb:
                    out.append((i, a - off + ca - pos, cb - ca))
                pos += b - a
        return pos

    out = [[] for _ in ts]
    for fi, f in enumerate(m["files"]):
        _, _, part, parts = held(0, f["rep"], f["sh"])
        T = walk(f["rep"], f["sh"], 0, 0, [])
        pieces = []
        walk(f["rep"], f["sh"], part_of(T, part, parts), part_of(T, part + 1, parts), pieces)
        off = 0
        for i, start, c in pieces:
            out[i].append({"start": start, "count": c, "file": fi, "master": off, "m": off + 4 * c, "v": off + 8 * c})
            off += 12 * c
        assert off == f["bytes"], f"{f['name']}: its pieces make {off} bytes, the manifest says {f['bytes']}"
    for r in out:
        r.sort(key=lambda x: x["start"])
    return out


def write_manifest(d, m):
    """manifest.json as hsr prints it (tabs), its crc32 made right."""
    m.pop("manifest_crc32", None)
    m["manifest_crc32"] = "00000000"  # its own crc32 is of the text with these digits
    text = (json.dumps(m, indent="\t") + "\n").encode()
    q = text.rindex(b'"00000000"') + 1
    text = text[:q] + b"%08x" % zlib.crc32(text) + text[q + 8:]
    open(os.path.join(d, "manifest.json"), "wb").write(text)


def to_v1(path):
    d, m = manifest(path)
    assert m["format_version"] == 2, f"{d}: format version {m['format_version']}, not 2"
    for f in m["files"]:
        f["block_crc32"] = block_crcs(m, f)
    for t, r in zip(m["tensors"], all_ranges(m)):
        t["ranges"] = r
    for f in m["files"]:
        del f["rep"], f["sh"]
    del m["mesh"]["outer_shard"]
    m["format_version"] = 1
    write_manifest(d, m)
    assert manifest(path)[1]["format_version"] == 1
    print(f"ckpt_read: {d}: the manifest rewritten in format version 1")


def tensors(path):
    """name -> {kind: list of floats}, shape; every file and block crc checked."""
    d, m = manifest(path)
    files = []
    for f in m["files"]:
        data = open(os.path.join(d, f["name"]), "rb").read()
        assert len(data) == f["bytes"], f"{f['name']}: {len(data)} bytes, manifest {f['bytes']}"
        assert zlib.crc32(data) == f["crc32"], f"{f['name']}: crc32"
        b = m["block_bytes"]
        blocks = [zlib.crc32(data[i:i + b]) for i in range(0, len(data), b)]
        assert blocks == block_crcs(m, f), f"{f['name']}: block crc32s"
        files.append(data)
    out = {}
    rs = all_ranges(m)
    for t, tr in zip(m["tensors"], rs):
        n = t["numel"]
        vals = {k: [None] * n for k in ("master", "m", "v")}
        at = 0
        for r in tr:
            assert r["start"] == at, f"{t['name']}: ranges do not tile"
            c = r["count"]
            for k in vals:
                off = r[k]
                vals[k][at:at + c] = struct.unpack_from(f"<{c}f", files[r["file"]], off)
            at += c
        assert at == n, f"{t['name']}: ranges cover {at} of {n}"
        out[t["name"]] = (t["shape"], vals)
    return m, out


def compare(a, b, tol):
    ma, ta = tensors(a)
    mb, tb = tensors(b)
    assert ma["step"] == mb["step"], f"steps {ma['step']} != {mb['step']}"
    assert sorted(ta) == sorted(tb), "different tensors"
    worst = 0.0
    for name, (shape, va) in ta.items():
        shape_b, vb = tb[name]
        assert shape == shape_b, f"{name}: shapes {shape} {shape_b}"
        for k in va:
            x, y = va[k], vb[k]
            if tol is None:
                bx = struct.pack(f"<{len(x)}f", *x)
                by = struct.pack(f"<{len(y)}f", *y)
                assert bx == by, f"{name} {k}: not bitwise equal"
                continue
            big = max((abs(v) for v in x), default=0.0) or 1.0
            diff = max((abs(p - q) for p, q in zip(x, y)), default=0.0) / big
            worst = max(worst, diff)
            assert diff <= tol, f"{name} {k}: relative difference {diff:.3g} > {tol}"
    what = "bitwise equal" if tol is None else f"equal within {tol} (worst {worst:.2e})"
    print(f"ckpt_read: {resolve(a)} and {resolve(b)}: step {ma['step']}, {len(ta)} tensors x (master, m, v) {what}")


ST_DTYPES = {"F32": ("f", 4), "F64": ("d", 8), "I32": ("i", 4), "I64": ("q", 8), "U8": ("B", 1)}


def safetensors(path):
    """Parses a safetensors file per its specification; name -> (dtype, shape, bytes)."""
    raw = open(path, "rb").read()
    assert len(raw) >= 8, "shorter than the length field"
    (n,) = struct.unpack_from("<Q", raw, 0)
    assert 8 + n <= len(raw) and n < 100_000_000, f"header length {n}"
    head = raw[8:8 + n].decode("utf-8")
    assert head.startswith("{"), "header does not start with '{'"
    assert len(head.rstrip(" ")) == len(head.rstrip()) and n % 8 == 0, "header padding"
    pairs = json.loads(head, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate names"
    buf = raw[8 + n:]
    out, spans = {}, []
    for k, v in pairs:
        v = dict(v)
        if k == "__metadata__":
            assert all(isinstance(a, str) and isinstance(b, str) for a, b in v.items()), "metadata not str->str"
            continue
        assert set(v) == {"dtype", "shape", "data_offsets"}, f"{k}: keys {sorted(v)}"
        s, e = v["data_offsets"]
        size = ST_DTYPES[v["dtype"]][1]
        count = 1
        for d in v["shape"]:
            count *= d
        assert e - s == count * size, f"{k}: offsets {s}..{e} for {count} x {size} bytes"
        spans.append((s, e))
        out[k] = (v["dtype"], v["shape"], buf[s:e])
    spans.sort()
    at = 0
    for s, e in spans:
        assert s == at, f"hole or overlap at byte {at}"
        at = e
    assert at == len(buf), f"tensors cover {at} of {len(buf)} bytes"
    return out


def st_meta(path):
    """The __metadata__ pairs of a safetensors file, in order."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    pairs = json.loads(raw[8:8 + n].decode("utf-8"), object_pairs_hook=lambda kv: kv)
    return next((v for k, v in pairs if k == "__metadata__"), [])


def st_index(d, ref, max_bytes):
    raw = open(os.path.join(d, "model.safetensors.index.json")).read()
    dup = []
    def pairs(kv):
        keys = [k for k, _ in kv]
        dup.extend(k for k in keys if keys.count(k) > 1)
        return dict(kv)
    idx = json.loads(raw, object_pairs_hook=pairs)
    assert not dup, f"names given twice: {sorted(set(dup))}"
    assert raw == json.dumps(idx, indent=2, sort_keys=True) + "\n", "not the text save_pretrained writes"
    assert set(idx) == {"metadata", "weight_map"}, sorted(idx)
    wm = idx["weight_map"]
    files = sorted(set(wm.values()))
    n = len(files)
    assert files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)], files
    on_disk = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    assert on_disk == files, f"files {on_disk}, the index names {files}"
    want, want_meta = safetensors(ref), st_meta(ref)
    order = list(want)  # REF's header order
    got, shard_of, size = {}, {}, []
    for k, f in enumerate(files):
        t = safetensors(os.path.join(d, f))
        assert st_meta(os.path.join(d, f)) == want_meta, f"{f}: metadata {st_meta(os.path.join(d, f))}"
        b = sum(len(v[2]) for v in t.values())
        assert b <= max_bytes or len(t) == 1, f"{f}: {b} bytes of {len(t)} tensors, above {max_bytes}"
        size.append(b)
        for name, v in t.items():
            assert wm.get(name) == f, f"{name} is in {f}, the weight_map says {wm.get(name)}"
            assert name not in got, f"{name} is in two files"
            got[name], shard_of[name] = v, k
    assert sorted(got) == sorted(wm) == sorted(want), f"names differ: {sorted(set(got) ^ set(want))}"
    for name in want:
        assert got[name] == want[name], f"{name}: dtype, shape or bytes differ from {ref}"
    total = sum(len(v[2]) for v in want.values())
    assert idx["metadata"]["total_size"] == total, f"total_size {idx['metadata']['total_size']}, tensors {total}"
    # tensors in order fill shards: shard numbers never go back, and a shard ends
    # only when the next tensor would not fit (or either is a tensor of its own)
    ks = [shard_of[name] for name in order]
    assert ks == sorted(ks) and ks[0] == 0 and len(set(ks)) == n, f"shards in tensor order: {ks}"
    for i in range(1, len(order)):
        if ks[i] != ks[i - 1]:
            nxt = len(want[order[i]][2])
            alone = size[ks[i - 1]] > max_bytes or nxt > max_bytes
            assert alone or size[ks[i - 1]] + nxt > max_bytes, f"{order[i]} would have fit in shard {ks[i - 1] + 1}"
    print(f"ckpt_read: {d}: {len(got)} tensors in {n} shards of at most {max_bytes} bytes (or one tensor), "
          f"total_size {total}, equal to {ref}")


def drop_model(path):
    d, m = manifest(path)
    assert "model" in m, f"{d}: the manifest records no model"
    del m["model"]
    write_manifest(d, m)
    assert "model" not in manifest(path)[1]
    print(f"ckpt_read: {d}: the manifest's model removed")


def st_equal(st_path, ckpt):
    st = safetensors(st_path)
    _, ts = tensors(ckpt)
    assert sorted(st) == sorted(ts), f"names differ: {sorted(set(st) ^ set(ts))}"
    for name, (dtype, shape, data) in st.items():
        cshape, vals = ts[name]
        assert dtype == "F32" and shape == cshape, f"{name}: {dtype} {shape}, checkpoint {cshape}"
        assert data == struct.pack(f"<{len(vals['master'])}f", *vals["master"]), f"{name}: values differ"
    print(f"ckpt_read: {st_path}: {len(st)} tensors parse per the specification and equal {resolve(ckpt)}'s master")


def main(argv):
    if len(argv) >= 3 and argv[0] == "compare":
        tol = float(argv[argv.index("--tol") + 1]) if "--tol" in argv else None
        compare(argv[1], argv[2], tol)
    elif len(argv) == 3 and argv[0] == "latest":
        got = open(os.path.join(argv[1], "latest")).read().strip()
        assert got == argv[2], f"{argv[1]}/latest names {got}, expected {argv[2]}"
        print(f"ckpt_read: {argv[1]}/latest names {got}")
    elif len(argv) == 3 and argv[0] == "st-equal":
        st_equal(argv[1], argv[2])
    elif len(argv) >= 2 and argv[0] == "st-meta":
        got = st_meta(argv[1])
        want = [tuple(a.split("=", 1)) for a in argv[2:]]
        assert [tuple(p) for p in got] == want, f"{argv[1]}: __metadata__ {got}, expected {want}"
        print(f"ckpt_read: {argv[1]}: __metadata__ {dict(got)}")
    elif len(argv) == 4 and argv[0] == "st-index":
        st_index(argv[1], argv[2], int(argv[3]))
    elif len(argv) == 2 and argv[0] == "drop-model":
        drop_model(argv[1])
    elif len(argv) == 2 and argv[0] == "to-v1":
        to_v1(argv[1])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
