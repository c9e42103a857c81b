"""What the whole-converter checks share: running kt-kernel's convert_cpu_weights.py through the
kt-client harness's site (its ktshim first), and reading a merged safetensors output's tensors."""
import glob, json, os, struct, subprocess, sys


def kt_convert(site, args, prelude=""):
    """kt's script with `args`, as the harness runs it; `prelude` is Python run before it."""
    script = os.path.join(site, "ktscripts", "convert_cpu_weights.py")
    env = dict(os.environ, PYTHONPATH=f"{site}/shims:{site}", PYTHONSTARTUP="")
    launcher = f"import ktshim, runpy, sys\n{prelude}\nsys.argv={[script] + args!r}\nrunpy.run_path({script!r}, run_name='__main__')"
    return subprocess.run([sys.executable, "-c", launcher], env=env, capture_output=True, text=True)


def merged_tensors(folder, with_shard=False):
    """name -> (dtype, shape, bytes[, shard file name]) of every tensor of the folder's shards."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        raw = open(path, "rb").read()
        size = struct.unpack("<Q", raw[:8])[0]
        for name, info in json.loads(raw[8:8 + size]).items():
            if name != "__metadata__":
                begin, end = info["data_offsets"]
                value = (info["dtype"], tuple(info["shape"]), raw[8 + size + begin:8 + size + end])
                out[name] = value + (os.path.basename(path),) if with_shard else value
    return out
