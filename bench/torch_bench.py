"""Helpers shared by the benchmarks: their common options, the skip when PyTorch is missing, the
environment of a fair PyTorch worker process (OpenBLAS, tcmalloc, thread counts, passive OpenMP
waiting: bench/README.md), running a worker that answers in JSON, the CPU's model name and the load
average printed beside the numbers, and the results file every benchmark writes with --out.

A results file (bench/results/<kind>-<YYYYmmdd-HHMM>-<cpu-slug>-<commit>.json) holds one run: its
table (markdown), its headline ratios, and the facts needed to judge it: the command line, the CPU
model and core count, the load average before and after, the versions of wte (git commit), oneDNN,
Highway and PyTorch, the ISA the run measured (its class: AVX2, AVX-512 or AMX, and the caps
that chose it), the OpenMP wait policy, the transparent-huge-page mode and the date (UTC).
bench/headline.py builds the README's headline table from the newest file of each kind and ISA.

Every benchmark takes --isa native|avx2|avx512: a capped run measures a narrower ISA on the machine
there is (a Zen 4 capped to AVX2 runs the 256-bit code a Zen 3 runs). The cap is three environment
variables every process of the run inherits (ISA_CAPS): ONEDNN_MAX_CPU_ISA (oneDNN, in wte and in
PyTorch), WTE_MAX_SIMD (wte's Highway kernels) and OPENBLAS_CORETYPE (OpenBLAS, PyTorch's BLAS).

The Python benchmarks run as scripts (/usr/bin/python3 bench/X.py), so this file's folder is on
sys.path and they `import torch_bench`. The shell benchmarks call this file as a program:

    /usr/bin/python3 bench/torch_bench.py record --kind KIND --out DIR --wte BIN \
        --load-before "L1 L5 L15" --started EPOCH --command "CMD" --table-file FILE \
        [--headline "CLAIM=VALUE[=UNIT]" ...]
"""
import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"

# ctest's exit code for a skipped test; the benchmarks use it when PyTorch is missing.
SKIP = 77

# --isa: the environment that caps every library of a run at one ISA. "native" sets nothing.
# ONEDNN_MAX_CPU_ISA and DNNL_MAX_CPU_ISA (the older name, which PyTorch's bundled oneDNN may read)
# take oneDNN's names; WTE_MAX_SIMD Highway's target names; OPENBLAS_CORETYPE OpenBLAS's kernels.
ISA_CAPS = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "WTE_MAX_SIMD": "AVX2",
             "OPENBLAS_CORETYPE": "Haswell"},
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "DNNL_MAX_CPU_ISA": "AVX512_CORE",
               "WTE_MAX_SIMD": "AVX3", "OPENBLAS_CORETYPE": "SkylakeX"},
}
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "WTE_MAX_SIMD", "OPENBLAS_CORETYPE")


def apply_isa(name):
    """Sets this process's environment (inherited by every wte and PyTorch process it starts) to
    the caps of ISA_CAPS[name]; exits naming the allowed names for any other."""
    if name not in ISA_CAPS:
        sys.exit("--isa %r: expected one of %s" % (name, ", ".join(ISA_CAPS)))
    os.environ.update(ISA_CAPS[name])
    os.environ["WTE_BENCH_ISA"] = name


def isa_class(onednn_isa):
    """The README's row group of a run from the oneDNN ISA in force: 'AMX', 'AVX-512', 'AVX2', or
    the ISA itself upper-cased (None when unknown)."""
    if not onednn_isa:
        return None
    if "amx" in onednn_isa:
        return "AMX"
    if "avx512" in onednn_isa:
        return "AVX-512"
    if onednn_isa.startswith("avx2"):
        return "AVX2"
    return onednn_isa.upper()


class _Parser(argparse.ArgumentParser):
    """argparse's parser that applies --isa as soon as the arguments are parsed, before the
    benchmark starts any process."""

    def parse_args(self, *args, **kwargs):
        a = super().parse_args(*args, **kwargs)
        apply_isa(a.isa)
        return a


def add_isa_option(p):
    """Adds --isa to the parser `p` (a parser from argument_parser applies it by itself; others
    call apply_isa(args.isa) after parsing)."""
    p.add_argument("--isa", default="native", choices=sorted(ISA_CAPS),
                   help="cap oneDNN, wte's Highway kernels and OpenBLAS at this ISA for the whole "
                        "run (native: the CPU's best); recorded in the results file")


def argument_parser(doc, shapes=False):
    """The benchmark's argparse parser: `doc` as its description (shown as written), --wte, --isa
    (applied by parse_args), and with `shapes` the loss/embedding shape options --vocab (GPT-2's
    50257), --d-model (768) and --tokens (8192), in that order."""
    p = _Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wte", default="build/wte", help="the built wte binary")
    add_isa_option(p)
    if shapes:
        p.add_argument("--vocab", type=int, default=50257)
        p.add_argument("--d-model", type=int, default=768)
        p.add_argument("--tokens", type=int, default=8192)
    return p


def torch_missing():
    """True (after printing the SKIP line with the Debian packages to install) when this
    interpreter cannot import torch; the caller then returns SKIP."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: PyTorch is not importable by /usr/bin/python3; install Debian's python3-torch "
              "(apt-get install python3-torch libopenblas0-pthread libtcmalloc-minimal4)")
        return True
    return False


def torch_env(threads, base=None, passive_wait=True):
    """The environment of a PyTorch worker process at `threads` threads: a copy of `base` (default
    os.environ) with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set, OMP_WAIT_POLICY=passive unless
    it is set or passive_wait is False, OpenBLAS's pthread build first on LD_LIBRARY_PATH and
    tcmalloc in LD_PRELOAD. Either library missing is said on stderr (the comparison is then
    unfair to PyTorch)."""
    env = dict(os.environ if base is None else base,
               OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if passive_wait:
        env.setdefault("OMP_WAIT_POLICY", "passive")
    if os.path.isdir(OPENBLAS_DIR):
        env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    else:
        print("warning: %s missing: torch uses the slow reference BLAS" % OPENBLAS_DIR, file=sys.stderr)
    if os.path.exists(TCMALLOC):
        env["LD_PRELOAD"] = TCMALLOC
    else:
        print("warning: %s missing: torch pays page faults on fresh gradients (its dense backward "
              "among them)" % TCMALLOC, file=sys.stderr)
    return env


def run_worker(argv, env, what="PyTorch worker"):
    """Runs `argv` (a worker: a script's own --worker mode) with `env` and returns its stdout; exits
    naming `what` and showing the worker's stderr when it fails."""
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (what, r.stderr))
    return r.stdout


def cpu_model():
    """lscpu's 'Model name' of this machine ('unknown' when lscpu is missing or does not say)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def load_average():
    """The 1-minute load average."""
    return os.getloadavg()[0]


RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def add_out_option(p):
    """Adds --out [DIR] to the parser `p`: write this run's results file into DIR (bench/results/
    when DIR is left out)."""
    p.add_argument("--out", nargs="?", const=RESULTS_DIR, metavar="DIR",
                   help="write this run's table and facts as one JSON file into DIR "
                        "(default DIR: bench/results/)")


def _lscpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in out.splitlines()) if v}


def _first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return None


def wte_versions(wte):
    """{'wte', 'git_commit', 'onednn', 'onednn_isa', 'highway', 'highway_target', 'highway_cap'}
    parsed from `wte --version` under this process's environment (its ISA caps included; missing
    keys when the binary is absent or says otherwise)."""
    v = {}
    try:
        out = subprocess.run([wte, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return v
    m = re.search(r"^wte (\S+) \(git (\w+)\)", out, re.M)
    if m:
        v["wte"], v["git_commit"] = m.group(1), m.group(2)
    m = re.search(r"^oneDNN (\S+).*?CPU ISA (\w+)", out, re.M)
    if m:
        v["onednn"], v["onednn_isa"] = m.group(1), m.group(2)
    m = re.search(r"^Highway (\S+).*?in force: (\w+); WTE_MAX_SIMD cap: (\w+)", out, re.M)
    if m:
        v["highway"], v["highway_target"], v["highway_cap"] = m.group(1), m.group(2), m.group(3)
    return v


def wte_has_bf16_gemms(wte):
    """Whether oneDNN runs bf16 GEMMs for `wte` here (its ISA, under this process's caps, has
    AVX512_BF16 or AMX); without them wte's bf16 mode runs float32 GEMMs."""
    isa = wte_versions(wte).get("onednn_isa", "")
    return "bf16" in isa or "amx" in isa


def cpu_flags():
    """The flags of /proc/cpuinfo's first processor (an empty set where it has none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def run_isa(versions):
    """The ISA facts of a run: the --isa asked for, the class of ISA the run measured (from wte's
    oneDNN ISA when known, else from the CPU's flags and the caps), the caps in the environment
    and what wte reported under them."""
    caps = {k: os.environ[k] for k in ISA_VARIABLES if os.environ.get(k)}
    cls = isa_class(versions.get("onednn_isa"))
    if cls is None:
        flags = cpu_flags()
        cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").lower()
        if "amx_bf16" in flags and not cap:
            cls = "AMX"
        elif "avx512f" in flags and (not cap or "avx512" in cap):
            cls = "AVX-512"
        elif "avx2" in flags:
            cls = "AVX2"
    return {"requested": os.environ.get("WTE_BENCH_ISA", "native"), "class": cls, "caps": caps,
            "onednn_isa": versions.get("onednn_isa"), "highway_target": versions.get("highway_target")}


def torch_version():
    """PyTorch's version as /usr/bin/python3 imports it, or None."""
    try:
        r = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None


def cpu_slug(model):
    """'AMD EPYC 9R45' -> 'amd-epyc-9r45': the CPU part of a results file's name."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "unknown-cpu"


class Recorder:
    """Collects the facts of one benchmark run. Create it before measuring (it notes the start
    time, the command line and the load average), call write() at the end."""

    def __init__(self, kind, wte=None, command=None, load_before=None, started=None):
        self.kind = kind
        self.wte = wte
        self.command = command if command is not None else " ".join(
            shlex.quote(a) for a in ["/usr/bin/python3"] + sys.argv)
        self.load_before = load_before if load_before is not None else list(os.getloadavg())
        self.started = started if started is not None else time.time()

    def facts(self):
        cpu = _lscpu()
        versions = wte_versions(self.wte) if self.wte else {}
        if "git_commit" not in versions:
            try:
                here = os.path.dirname(os.path.abspath(__file__))
                versions["git_commit"] = subprocess.run(
                    ["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                    text=True).stdout.strip() or "unknown"
            except OSError:
                versions["git_commit"] = "unknown"
        versions["pytorch"] = torch_version()
        thp = _first_line("/sys/kernel/mm/transparent_hugepage/enabled") or ""
        m = re.search(r"\[(\w+)\]", thp)
        return {
            "command": self.command,
            "cpu": {"model": cpu.get("Model name", "unknown"), "family": cpu.get("CPU family"),
                    "model_number": cpu.get("Model"), "cores": os.cpu_count()},
            "load_average_before": self.load_before,
            "load_average_after": list(os.getloadavg()),
            "versions": versions,
            "isa": run_isa(versions),
            "environment": {k: os.environ.get(k) for k in
                            ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "LD_PRELOAD") if os.environ.get(k)},
            "pytorch_worker": {"openblas_pthread": os.path.isdir(OPENBLAS_DIR),
                               "tcmalloc_preloaded": os.path.exists(TCMALLOC)},
            "transparent_hugepages": m.group(1) if m else None,
            "started_utc": datetime.datetime.fromtimestamp(self.started, datetime.timezone.utc)
                           .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "finished_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def write(self, out_dir, table, headline=(), claim=None):
        """Writes the results file into `out_dir` (nothing when it is None) and returns its path.
        table: the markdown the benchmark printed. headline: [(what, value, unit)] ratios, each a
        claim the README's headline table may quote. claim: one sentence saying what the run
        measures."""
        if not out_dir:
            return None
        facts = self.facts()
        commit = facts["versions"].get("git_commit", "unknown")
        stamp = datetime.datetime.fromtimestamp(self.started, datetime.timezone.utc).strftime("%Y%m%d-%H%M")
        capped = facts["isa"]["requested"]
        name = "%s-%s-%s-%s%s.json" % (self.kind, stamp, cpu_slug(facts["cpu"]["model"]), commit,
                                       "" if capped == "native" else "-" + capped)
        doc = {"kind": self.kind, "claim": claim,
               "headline": [{"what": w, "value": v, "unit": u} for w, v, u in headline]}
        doc.update(facts)
        doc["table"] = table
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, name)
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, ensure_ascii=False)
            f.write("\n")
        os.replace(path + ".tmp", path)
        print("results: %s" % path, file=sys.stderr)
        return path


def _record_main(argv):
    """`torch_bench.py record ...`: the results file of a shell benchmark (see the module doc)."""
    p = argparse.ArgumentParser(prog="torch_bench.py record")
    p.add_argument("--kind", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--wte")
    p.add_argument("--command", required=True)
    p.add_argument("--load-before", required=True, help="'L1 L5 L15' as /proc/loadavg had them")
    p.add_argument("--started", type=float, required=True, help="seconds since the epoch")
    p.add_argument("--table-file", required=True)
    p.add_argument("--claim")
    p.add_argument("--headline", action="append", default=[], help="WHAT=VALUE[=UNIT]")
    a = p.parse_args(argv)
    # The shell benchmarks export the caps themselves (bench/results.sh); the record inherits them.
    headline = []
    for h in a.headline:
        parts = h.split("=")
        if len(parts) not in (2, 3):
            sys.exit("--headline %r: expected WHAT=VALUE[=UNIT]" % h)
        headline.append((parts[0], float(parts[1]), parts[2] if len(parts) == 3 else "x"))
    with open(a.table_file) as f:
        table = f.read().rstrip("\n")
    rec = Recorder(a.kind, wte=a.wte, command=a.command,
                   load_before=[float(x) for x in a.load_before.split()[:3]], started=a.started)
    rec.write(a.out, table, headline, a.claim)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "record":
        sys.exit(_record_main(sys.argv[2:]))
    sys.exit("usage: torch_bench.py record --kind KIND --out DIR ... (see the module doc)")
