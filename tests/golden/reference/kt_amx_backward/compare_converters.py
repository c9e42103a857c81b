"""Whole-output check: kt-kernel's convert_cpu_weights.py --save-backward-weights against
moequant convert --save-backward-weights, on a synthesized model, int8 and int4, merged and tree.

Runs kt's script as /work/shared/tools/kt-client/check_kt_scripts.py does (through its ktshim
launcher; that check passes no --save-backward-weights, hence this script), then compares every
tensor (name, dtype, shape, bytes) of the merged outputs and every file (name, bytes) of the trees.

usage: KT_SITE=<kt site> MOEQUANT=<moequant> python3 compare_converters.py WORK [tiny|small]
Exit 0 when every pair is identical.
"""
import glob, json, os, struct, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kt_script_run  # noqa: E402  (tests/golden/reference)

SITE = os.environ["KT_SITE"]
MOEQUANT = os.environ.get("MOEQUANT", "moequant")


def kt_convert(args):
    return kt_script_run.kt_convert(SITE, args)


merged_tensors = kt_script_run.merged_tensors


def tree_files(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), folder)
            if not rel.startswith("moequant-run"):
                out[rel] = open(os.path.join(root, name), "rb").read()
    return out


def main():
    work, preset = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "tiny"
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, preset)
    if not os.path.exists(model):
        subprocess.run([MOEQUANT, "synth", "--family", "qwen3_moe", "--preset", preset, "--out", model], check=True)
    failures = 0
    for method in ("int8", "int4"):
        for layout, extra in (("merged", []), ("tree", ["--no-merge-safetensor"])):
            kt, mq = (os.path.join(work, f"{who}.{method}.{layout}") for who in ("kt", "mq"))
            for d in (kt, mq):
                subprocess.run(["rm", "-rf", d], check=True)
            r = kt_convert(["-i", model, "-o", kt, "--input-type", "bf16", "--quant-method", method, "--cpuinfer-threads", "2",
                            "--threadpool-count", "2", "--save-backward-weights"] + extra)
            if r.returncode != 0:
                print(f"{method} {layout}: kt's converter failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
                failures += 1
                continue
            subprocess.run([MOEQUANT, "convert", "-i", model, "-o", mq, "--quant-method", method, "--threadpool-count", "2",
                            "--save-backward-weights", "-q"] + extra, check=True)
            a, b = (merged_tensors(kt), merged_tensors(mq)) if layout == "merged" else (tree_files(kt), tree_files(mq))
            same = [k for k in a if b.get(k) == a[k]]
            size = sum(len(a[k][2] if layout == "merged" else a[k]) for k in same)
            ok = len(same) == len(a) == len(b)
            failures += not ok
            print(f"{preset} {method} {layout}: kt {len(a)}, moequant {len(b)}, identical {len(same)} ({size} bytes), "
                  f"{sum('_bwd' in k for k in a)} backward; {'PASS' if ok else 'FAIL'}"
                  + ("" if ok else f" kt-only {sorted(set(a) - set(b))[:3]} moequant-only {sorted(set(b) - set(a))[:3]} "
                                   f"differing {[k for k in a if k in b and a[k] != b[k]][:3]}"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
