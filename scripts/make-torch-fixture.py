#!/usr/bin/python3
"""Writes the PyTorch `.bin` fixtures of tests/data/torch with torch itself (torch.save), plus
a safetensors twin holding the same tensors, for the torch_checkpoint unit suite, the
torch_bin integration suite and the fuzz_torch_checkpoint seeds.

    /usr/bin/python3 scripts/make-torch-fixture.py [OUT]      # OUT defaults to tests/data/torch

Run once by hand with Debian's python3-torch (Debian 12: 1.13.1); CI only reads the files. The
output is deterministic (torch 1.13 writes zeroed zip timestamps), so rerunning it changes
nothing unless torch does.

What it writes:
  single/pytorch_model.bin        one torch.save'd state dict: every dtype moequant maps
                                  (BF16, F16, F32, F64, I64, I32, I16, I8, U8, BOOL), a tied pair
                                  sharing one storage, two row slices of one larger storage
                                  (saved whole, read at their storage offsets), a 0-dim and an
                                  empty tensor, and nn.Module's `_metadata` attribute
  sharded/                        the same tensors in two shards + pytorch_model.bin.index.json
  twin/model.safetensors          the same tensors, contiguous copies, written here by hand
  hostile/os_system.bin           a state dict holding an object whose __reduce__ is
                                  os.system("touch /tmp/moequant-pwned-os-system")
  hostile/unknown_global.bin      a whole nn.Linear module saved (global torch.nn.modules.linear.Linear)
  hostile/noncontiguous.bin       a transposed (non-contiguous) tensor
  hostile/truncated.bin           the first half of single/pytorch_model.bin
  pickles/*.pkl                   the data.pkl of each file above (seeds for the fuzzer's
                                  pickle-only mode, which wraps its input in a zip itself)

Nothing here ever unpickles a hostile file except with torch.load(weights_only=True), which
must refuse it (checked below): the script also confirms that torch's own weights-only reader
accepts the good files and reads the values the twin holds.
"""
import collections
import json
import os
import struct
import sys
import zipfile

import torch

SIDE_EFFECT = "/tmp/moequant-pwned-os-system"

SAFETENSORS_DTYPE = {
    torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}


def state_dict():
    """The tensors, in the order a module's state_dict() would list them."""
    sd = collections.OrderedDict()
    embed = (torch.arange(32, dtype=torch.float32).reshape(8, 4) / 8 - 1).to(torch.bfloat16)
    sd["model.embed_tokens.weight"] = embed
    sd["model.layers.0.self_attn.q_proj.weight"] = (torch.arange(16, dtype=torch.float32).reshape(4, 4) / 3).half()
    sd["model.layers.0.mlp.gate.weight"] = torch.linspace(-2, 2, 12, dtype=torch.float32).reshape(3, 4)
    # Two row slices of one [10, 4] storage: torch.save writes the whole storage once and each
    # tensor at its storage offset (8 and 20 elements); rows 0-1 and 9 belong to neither.
    base = torch.arange(40, dtype=torch.float32).reshape(10, 4) * 0.5
    sd["model.layers.0.mlp.experts.0.up_proj.weight"] = base[2:5]
    sd["model.layers.0.mlp.experts.1.up_proj.weight"] = base[5:9]
    sd["model.layers.0.mlp.experts.0.down_proj.weight"] = torch.arange(8, dtype=torch.float64).reshape(4, 2) - 3
    sd["model.layers.0.position_ids"] = torch.arange(5, dtype=torch.int64) * 1_000_000_007
    sd["model.layers.0.counts_i32"] = torch.tensor([-7, 0, 2**31 - 1], dtype=torch.int32)
    sd["model.layers.0.counts_i16"] = torch.tensor([[-300, 1], [2, 32767]], dtype=torch.int16)
    sd["model.layers.0.codes_i8"] = torch.tensor([-128, -1, 0, 127], dtype=torch.int8)
    sd["model.layers.0.codes_u8"] = torch.tensor([0, 128, 255], dtype=torch.uint8)
    sd["model.layers.0.mask"] = torch.tensor([True, False, True])
    sd["model.norm.scale"] = torch.tensor(1.5)  # 0-dim
    sd["model.unused_empty"] = torch.zeros(0, 4)
    sd["lm_head.weight"] = embed  # tied: the same tensor, one storage
    return sd


def with_module_metadata(sd):
    """nn.Module.state_dict() attaches `_metadata` (pickled as BUILD on the OrderedDict)."""
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("model", {"version": 1})])
    return sd


def tensor_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def write_safetensors(path, sd):
    header, data = {}, b""
    for name in sorted(sd):
        t = sd[name]
        raw = tensor_bytes(t)
        header[name] = {"dtype": SAFETENSORS_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


class RunsOsSystem:
    """Pickles as a call of os.system: what a malicious checkpoint does to torch.load."""

    def __reduce__(self):
        return (os.system, ("touch " + SIDE_EFFECT,))


def must_refuse(path):
    try:
        torch.load(path, weights_only=True)
    except Exception as e:  # torch's weights-only reader refuses, as moequant must
        return str(e).splitlines()[0]
    raise SystemExit(f"torch.load(weights_only=True) accepted {path}")


def check_same(path, sd):
    loaded = torch.load(path, weights_only=True)
    assert list(loaded) == list(sd), path
    for name, t in sd.items():
        assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape, name
        assert tensor_bytes(loaded[name]) == tensor_bytes(t), name


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "torch")
    for sub in ("single", "sharded", "twin", "hostile", "pickles"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)

    sd = with_module_metadata(state_dict())
    single = os.path.join(out, "single", "pytorch_model.bin")
    torch.save(sd, single)
    check_same(single, sd)
    write_safetensors(os.path.join(out, "twin", "model.safetensors"), sd)

    names = list(sd)
    first = [n for n in names if n.startswith("model.embed") or n.startswith("lm_head") or "self_attn" in n]
    shards = [("pytorch_model-00001-of-00002.bin", first),
              ("pytorch_model-00002-of-00002.bin", [n for n in names if n not in first])]
    weight_map, total = {}, 0
    for file, members in shards:
        part = with_module_metadata(collections.OrderedDict((n, sd[n]) for n in members))
        torch.save(part, os.path.join(out, "sharded", file))
        check_same(os.path.join(out, "sharded", file), part)
        for n in members:
            weight_map[n] = file
            total += sd[n].numel() * sd[n].element_size()
    with open(os.path.join(out, "sharded", "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")

    hostile = os.path.join(out, "hostile")
    torch.save({"model.norm.scale": torch.tensor(1.0), "payload": RunsOsSystem()}, os.path.join(hostile, "os_system.bin"))
    torch.manual_seed(0)
    torch.save(torch.nn.Linear(2, 2), os.path.join(hostile, "unknown_global.bin"))
    torch.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3).t()}, os.path.join(hostile, "noncontiguous.bin"))
    with open(single, "rb") as f:
        whole = f.read()
    with open(os.path.join(hostile, "truncated.bin"), "wb") as f:
        f.write(whole[: len(whole) // 2])

    for path in (single, os.path.join(out, "sharded", shards[1][0]), *(os.path.join(hostile, n) for n in
                 ("os_system.bin", "unknown_global.bin", "noncontiguous.bin"))):
        with zipfile.ZipFile(path) as z:
            pickle_entry = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            stem = os.path.basename(path).replace(".bin", "")
            with open(os.path.join(out, "pickles", stem + ".pkl"), "wb") as f:
                f.write(z.read(pickle_entry))

    for name in ("os_system.bin", "unknown_global.bin", "truncated.bin"):
        print(f"torch refuses {name}: {must_refuse(os.path.join(hostile, name))}")
    assert not os.path.exists(SIDE_EFFECT), "something ran the payload"
    print(f"wrote {out} with torch {torch.__version__}")


if __name__ == "__main__":
    main()
