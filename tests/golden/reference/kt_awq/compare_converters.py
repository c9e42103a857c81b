"""Whole-output check: kt-kernel's `convert_cpu_weights.py --quant-method awq` against
`moequant convert --quant-method awq`, on an AutoAWQ checkpoint moequant synthesizes.

kt's AWQToColumnMajorConverter moves each batch of words to "cuda" unconditionally; this
machine has no GPU, so the launcher maps that one device name to the CPU (torch.Tensor.to with
"cuda"). Nothing else of kt is touched: its unpack, reverse_awq_interleaving, pack and its
shard, index and side-file writing run as they are, through the kt-client harness's ktshim.

Every tensor of the two outputs (name, dtype, shape, bytes), the index's weight_map keys and the
side files are compared.

usage: KT_SITE=<kt site> MOEQUANT=<moequant> python3 compare_converters.py WORK [family ...]
Exit 0 when every pair is identical.
"""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kt_script_run  # noqa: E402  (tests/golden/reference)

SITE = os.environ["KT_SITE"]
MOEQUANT = os.environ.get("MOEQUANT", "moequant")

CUDA_TO_CPU = """
import torch
_to = torch.Tensor.to
def _cpu_for_cuda(self, *a, **k):
    a = tuple("cpu" if x == "cuda" else x for x in a)
    if k.get("device") == "cuda": k["device"] = "cpu"
    return _to(self, *a, **k)
torch.Tensor.to = _cpu_for_cuda
"""


def kt_convert(args):
    return kt_script_run.kt_convert(SITE, args, prelude=CUDA_TO_CPU)


def merged_tensors(folder):
    return kt_script_run.merged_tensors(folder, with_shard=True)


def skipped_by_convention(name, layers):
    """What kt copies and moequant never does (docs/conventions.md): MTP layers, rotary buffers."""
    fields = name.split(".")
    mtp_layer = fields[0] == "blk" and fields[1].isdigit() and int(fields[1]) >= layers
    return mtp_layer or name.startswith("mtp.") or ".mtp." in name or name.endswith("rotary_emb.inv_freq")


def compare(kt, mq, layers):
    a, b = merged_tensors(kt), merged_tensors(mq)
    skipped = {n for n in a if n not in b and skipped_by_convention(n, layers)}
    a = {n: v for n, v in a.items() if n not in skipped}
    problems = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            problems.append(f"{name}: only in {'kt' if name in a else 'moequant'}")
        elif a[name][:3] != b[name][:3]:
            problems.append(f"{name}: kt {a[name][:2]} vs moequant {b[name][:2]}, bytes {'equal' if a[name][2] == b[name][2] else 'differ'}")
        elif a[name][3] != b[name][3]:
            problems.append(f"{name}: in kt's {a[name][3]}, moequant's {b[name][3]}")
    ia = {n: f for n, f in json.load(open(os.path.join(kt, "model.safetensors.index.json")))["weight_map"].items()
          if n not in skipped}
    ib = json.load(open(os.path.join(mq, "model.safetensors.index.json")))["weight_map"]
    if ia != ib:
        problems.append("index weight_map differs")
    for side in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        pa, pb = os.path.join(kt, side), os.path.join(mq, side)
        if os.path.exists(pa) != os.path.exists(pb) or (os.path.exists(pa) and open(pa, "rb").read() != open(pb, "rb").read()):
            problems.append(f"{side} differs")
    experts = sum(1 for n in a if ".ffn_" in n and "_exps." in n)
    return problems, len(a), experts, len(skipped)


def main():
    work = sys.argv[1]
    families = sys.argv[2:] or ["qwen3_moe"]
    os.makedirs(work, exist_ok=True)
    failures = 0
    for family in families:
        model = os.path.join(work, f"{family}.awq")
        if not os.path.exists(model):
            subprocess.run([MOEQUANT, "synth", "--family", family, "--dtype", "awq", "--out", model], check=True,
                           capture_output=True)
        kt, mq = os.path.join(work, f"kt.{family}"), os.path.join(work, f"mq.{family}")
        subprocess.run(["rm", "-rf", kt, mq], check=True)
        r = kt_convert(["-i", model, "-o", kt, "--input-type", "awq", "--quant-method", "awq"])
        if r.returncode != 0 or not os.path.exists(os.path.join(kt, "model.safetensors.index.json")):
            print(f"{family}: kt's converter failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            failures += 1
            continue
        subprocess.run([MOEQUANT, "convert", "-i", model, "-o", mq, "--input-type", "awq", "--quant-method", "awq", "-q"],
                       check=True)
        layers = json.load(open(os.path.join(model, "config.json"))).get("num_hidden_layers", 1 << 30)
        if "text_config" in json.load(open(os.path.join(model, "config.json"))):
            layers = json.load(open(os.path.join(model, "config.json")))["text_config"]["num_hidden_layers"]
        problems, tensors, experts, skipped = compare(kt, mq, layers)
        print(f"{family}: {tensors} tensors ({experts} expert tensors; {skipped} MTP/rotary-buffer tensors kt copies, "
              "moequant skips by convention): " +
              ("identical" if not problems else f"{len(problems)} difference(s)"))
        for p in problems[:20]:
            print("   ", p)
        failures += bool(problems)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
