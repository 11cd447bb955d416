#!/bin/bash
# `wte profile` as a user runs it (small shapes, --quick): the table, --json, --chart, the step
# split, and clear errors for a bad distribution or strategy. Timings are printed, never asserted.
set -euo pipefail
: "${WTE_CLI:?}" "${WTE_BINARY_DIR:?}"
dir=$(mktemp -d "${WTE_BINARY_DIR}/profile_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '\x05\x00\x00\x00\x07\x00\x00\x00\x05\x00\x00\x00' > "$dir/ids.bin"   # ids 5 7 5
"$WTE_CLI" profile scatter --quick --vocab-size 1000 --d-model 40 --n-tokens 512 --threads 1,2 \
  --dist uniform,zipf:1.1,same,sequential,file:"$dir/ids.bin" --json "$dir/p.json" \
  --chart "$dir/p.svg" > "$dir/out.txt" 2> "$dir/err.txt" || fail "profile scatter exited $?"
grep -q "scatter     sorted" "$dir/out.txt" || fail "no sorted row in the table"
grep -q "lazy-adamw" "$dir/out.txt" || fail "no lazy-adamw row"
grep -qE "scatter-rows +sorted .* rows out" "$dir/out.txt" || fail "no scatter-rows row"
grep -q "row-memcpy" "$dir/out.txt" || fail "no row-memcpy limit"
# stderr is a file here, not a terminal: no "\r\e[K profile: ..." progress lines in it.
if grep -q $'\r' "$dir/err.txt"; then fail "progress lines written to a non-terminal stderr"; fi
# Deterministic strategies: same bits for 2 threads as for 1, on every distribution.
for s in serial sorted row-range auto=sorted; do
  n=$(grep -E "^  2 .* warm  scatter +$s " "$dir/out.txt" | grep -c "same bits as 1t" || true)
  [ "$n" = 5 ] || fail "strategy $s: $n of 5 distributions had the same bits for 2 threads"
done
/usr/bin/python3 - "$dir/p.json" <<'PY' || fail "json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["vocab"] == 1000 and j["d_model"] == 40 and j["tokens"] == 512, j
ks = j["kernels"]
assert {k["kernel"] for k in ks} == {"copy", "read", "row-read", "row-memcpy", "scatter",
                                     "scatter-rows", "lazy-adamw"}, ks
assert {k["strategy"] for k in ks if k["kernel"] == "copy"} == {"vector-nt", "memcpy"}, ks
assert all(k["ms"] > 0 and k["gbs"] > 0 for k in ks)
assert {k["cache"] for k in ks} == {"warm", "cold"}
PY
grep -q "<svg" "$dir/p.svg" && grep -q "stroke-dasharray" "$dir/p.svg" || fail "chart has no bars/limit line"

# The chart is the one SVG writer's (src/analysis/svg.h): well-formed XML even when its path and
# the id file's path (a bar label) hold '&' and '<'; every y tick label equals the value at its
# position (the map label -> y is one straight line, and each bar's top lies on it at its value);
# a colour legend names every kernel and both limit lines.
odd="$dir/a&b<c"
mkdir -p "$odd"
cp "$dir/ids.bin" "$odd/ids.bin"
"$WTE_CLI" profile scatter --quick --vocab-size 1000 --d-model 40 --n-tokens 512 --threads 1 \
  --dist "uniform,file:$odd/ids.bin" --strategy sorted --chart "$odd/chart.svg" > "$dir/odd.txt" 2>&1 \
  || fail "profile with '&' and '<' in the paths exited $?: $(cat "$dir/odd.txt")"
/usr/bin/python3 - "$odd/chart.svg" <<'PY' || fail "chart"
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()          # raises on malformed XML
ticks = []
for g in root.iterfind(".//s:g[@class='ytick']", ns):
    line = g.find("s:line", ns)
    ticks.append((float(g.find("s:text", ns).text), float(line.get("y1"))))
assert len(ticks) >= 3, ticks
(v0, y0), (v1, y1) = ticks[0], ticks[-1]
scale = (y1 - y0) / (v1 - v0)
for v, y in ticks:
    assert abs(y0 + (v - v0) * scale - y) < 0.05, ("tick label", v, "drawn at", y)
bars = root.findall(".//s:rect[@class='bar']", ns)
assert len(bars) == 4, len(bars)   # uniform and the file, scatter sorted and lazy-adamw
for b in bars:
    v = float(b.get("data-value"))
    assert abs(y0 + (v - v0) * scale - float(b.get("y"))) < 0.05, ("bar", v, b.get("y"))
texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
assert any("a&b<c/ids.bin" in t for t in texts), "the file's path is not in a bar label"
for name in ("gather", "scatter", "lazy-adamw", "streaming copy limit", "random-row memcpy"):
    assert name in texts, ("legend lacks", name)
print("chart ok:", len(ticks), "ticks,", len(bars), "bars")
PY
grep -qE '^machine: .+, [0-9]+ CPUs; load average [0-9.]+ [0-9.]+ [0-9.]+' "$dir/odd.txt" \
  || fail "profile does not name the CPU and the load average"
/usr/bin/python3 - "$dir/p.json" <<'PY' || fail "json machine"
import json, sys
m = json.load(open(sys.argv[1]))["machine"]
assert m["cpu_model"] and m["cpus"] >= 1 and len(m["load_average"]) == 3, m
assert m["busy"] == (m["load_average"][0] >= 0.5 * m["cpus"]), m
assert m["highway_target"] and m["onednn_isa"], m
assert all(isinstance(m[k], int) and m[k] >= 0 for k in ("l1d_bytes", "l2_bytes", "l3_bytes")), m
PY
grep -qE '^machine: L1d .+; Highway [A-Z0-9_]+, oneDNN [a-z0-9_]+' "$dir/odd.txt" \
  || fail "profile does not name the caches and the ISAs"

# The gather: both store kinds (the automatic choice and the other), the lookup with wpe, and the
# limits it is compared with.
"$WTE_CLI" profile gather --quick --vocab-size 1000 --d-model 40 --n-tokens 512 --threads 1,2 \
  --dist uniform --json "$dir/g.json" > "$dir/g.txt" 2>/dev/null || fail "profile gather"
/usr/bin/python3 - "$dir/g.json" <<'PY' || fail "gather json"
import json, sys
ks = json.load(open(sys.argv[1]))["kernels"]
g = sorted({k["strategy"] for k in ks if k["kernel"] == "gather"})
assert g == ["auto=cached", "stream"], g   # 2 x 512 x 40 x 4 bytes: far below the cache
assert {k["kernel"] for k in ks} >= {"gather", "lookup", "copy", "read", "row-read", "row-memcpy"}, ks
PY

"$WTE_CLI" profile step --quick --threads 1 > "$dir/step.txt" 2>/dev/null || fail "profile step"
grep -q "all but the GEMMs" "$dir/step.txt" || fail "step table"
# Without --config the step is configs/default.ini's model, and says so.
grep -q "step: the built-in defaults (configs/default.ini's model): V 8192, C 256, n_layer 4, n_head 4, B 16, T 128" \
  "$dir/step.txt" || fail "profile step without --config: not configs/default.ini's model: $(grep '^step:' "$dir/step.txt")"
grep -q "logits GEMM" "$dir/step.txt" || fail "step parts"
# A block model: every layer kind has its line, and the MFU against the GEMM peak of the same run.
cat > "$dir/blocks.ini" <<'INI'
[model]
vocab_size = 300
d_model = 32
n_ctx = 16
n_layer = 2
n_head = 2
[data]
seq_len = 16
[train]
batch_size = 2
INI
"$WTE_CLI" profile step --quick --threads 1,2 --config "$dir/blocks.ini" --json "$dir/step.json" \
  > "$dir/blocks.txt" 2>/dev/null || fail "profile step with blocks"
for part in "qkv GEMM (c_attn) forward" "attention QKᵀ forward" "causal softmax forward" \
            "attention ·V forward" "attn-proj GEMM forward" "fc GEMM (c_fc) forward" "GELU forward" \
            "fc-proj GEMM forward" "LayerNorms ln_1, ln_2 forward" "residual adds" \
            "qkv GEMM backward" "causal softmax backward" "bias gradients" "GELU backward" \
            "LayerNorms backward" "softmax cross-entropy" "scatter (lookup b" "AdamW"; do
  grep -qF "$part" "$dir/blocks.txt" || fail "no line '$part' in the block step profile"
done
grep -q "MFU, PaLM's count (the headline, against the GEMM peak): model FLOPs utilisation: .* of that peak" "$dir/blocks.txt" \
  || fail "no headline MFU line (PaLM's count)"
grep -q "MFU, causal count: model FLOPs utilisation: .* of that peak" "$dir/blocks.txt" \
  || fail "no causal MFU line"
grep -q "f32 GEMM peak (.*GFLOP/s on .*(GFLOP/s: onednn " "$dir/blocks.txt" || fail "no GEMM peak line naming each library"
grep -q "FMA limit (float32; 12 chains of .*-lane FMAs on registers, .*GFLOP/s; the GEMM peak is .*% of it" "$dir/blocks.txt" \
  || fail "no FMA limit line"
grep -q "MFU, PaLM's count, against the FMA limit (the silicon): " "$dir/blocks.txt" || fail "no MFU against the FMA limit"
grep -qE "softmax cross-entropy = [0-9.]+ x a streaming read \+ write of its [0-9.]+ MB of logits" \
  "$dir/blocks.txt" || fail "no cross-entropy vs streaming line"
/usr/bin/python3 - "$dir/step.json" <<'PY' || fail "step json"
import json, sys
steps = json.load(open(sys.argv[1]))["step"]
assert [s["threads"] for s in steps] == [1, 2], steps
for s in steps:
    # 6 · parameters · tokens + 12 · n_layer · T · C · tokens, parameters of the tied model
    C, V, L, T, B = 32, 300, 2, 16, 2
    params = V * C + 16 * C + 2 * C + L * (12 * C * C + 13 * C)
    assert s["parameters"] == params, (s["parameters"], params)
    assert abs(s["model_flops"] - (6 * params * B * T + 12 * L * T * C * B * T)) < 1, s["model_flops"]
    assert s["gemm_peak_gflops"] > 0 and s["step_ms"] > 0
    assert abs(s["mfu"] - s["model_flops"] / (s["step_ms"] * 1e-3) / (s["gemm_peak_gflops"] * 1e9)) < 1e-9
    # causal: attention over the T(T+1)/2 entries on and below the diagonal only
    assert abs(s["model_flops_causal"] - (6 * params * B * T + 6 * L * (T + 1) * C * B * T)) < 1, s
    assert abs(s["mfu_causal"] - s["model_flops_causal"] / (s["step_ms"] * 1e-3)
               / (s["gemm_peak_gflops"] * 1e9)) < 1e-9
    assert s["mfu_headline"] == "palm" and s["mfu_causal"] < s["mfu"], s
    assert s["fma_limit_gflops"] > 0 and s["fma_lanes"] >= 1, s
    assert abs(s["mfu_fma"] - s["model_flops"] / (s["step_ms"] * 1e-3) / (s["fma_limit_gflops"] * 1e9)) < 1e-9
    assert s["gemm_peak_gflops"] == max(s["gemm_peaks"].values()), s
    assert s["gemm_peaks"][s["gemm_peak_library"]] == s["gemm_peak_gflops"], s
    parts = {p["part"]: p for p in s["parts"]}
    assert parts["qkv GEMM (c_attn) forward"]["gemm"] and parts["GELU forward"]["gemm"] is False
    assert abs(parts["qkv GEMM (c_attn) forward"]["gflop"] - 2 * B * T * C * 3 * C * L / 1e9) < 1e-12
    # unfused loss (V 300): the streaming read + write of its B*T x V logits was timed
    assert s["logits_bytes"] == B * T * V * 4 and s["logits_copy_ms"] > 0, s
    # every GEMM part was timed (the model opened it): none is left at 0 ms
    assert all(p["ms"] > 0 for p in s["parts"] if p["gemm"]), [p for p in s["parts"] if p["gemm"]]
PY

# Config keys on the command line change --config's keys for step (as wte train takes them): the
# same block config with the fused loss and another batch size, without writing a new file.
"$WTE_CLI" profile step --quick --threads 1 --config "$dir/blocks.ini" --model.loss_chunk=8 \
  --train.batch_size=3 --json "$dir/over.json" > "$dir/over.txt" 2>/dev/null \
  || fail "profile step with config keys exited $?"
grep -qF "step: $dir/blocks.ini --model.loss_chunk=8 --train.batch_size=3: V 300, C 32, n_layer 2" \
  "$dir/over.txt" || fail "the step line does not name the config keys: $(grep '^step' "$dir/over.txt")"
/usr/bin/python3 - "$dir/over.json" <<'PY' || fail "step json with config keys"
import json, sys
s = json.load(open(sys.argv[1]))["step"][0]
assert (s["B"], s["T"], s["n_layer"], s["V"]) == (3, 16, 2, 300), s
parts = [p["part"] for p in s["parts"]]
assert "fused logits + cross-entropy + dh + dlm_head" in parts, parts   # model.loss_chunk=8
assert "softmax cross-entropy" not in parts and s["logits_bytes"] == 0, parts
assert all(p["ms"] > 0 for p in s["parts"] if p["gemm"]), [p for p in s["parts"] if p["gemm"]]
PY
# The table's columns line up, also the fused loss's 44-character row (names counted in characters:
# they hold ᵀ and ·).
/usr/bin/python3 - "$dir/over.txt" <<'PY' || fail "the step table's ms column is not aligned: $(cat "$dir/over.txt")"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
h = next(i for i, l in enumerate(lines) if l.lstrip().startswith("part ") and "GEMM kernel" in l)
end = lines[h].index(" ms ") + 3
for l in lines[h + 1:]:
    m = re.match(r"  (.*?\S)\s+(\d+\.\d{3}) +\d+\.\d%", l)
    assert m and m.end(2) == end, (l, end)
    if "all but the GEMMs" in l:
        break
PY
# A bad key or value is bad usage (2), named, before anything is measured; keys with scatter or
# gather (which take no config) are refused rather than ignored.
for args in "step --model.loss_chunk=-1|model.loss_chunk" "step --model.no_such_key=1|--model.no_such_key" \
            "scatter --model.loss_chunk=8|change the config of \`step\` only" \
            "step --no-such-option|unknown option '--no-such-option'"; do
  rc=0
  "$WTE_CLI" profile ${args%%|*} --quick --config "$dir/blocks.ini" > "$dir/e.out" 2> "$dir/e.err" || rc=$?
  [ $rc = 2 ] && grep -qF -- "${args#*|}" "$dir/e.err" && ! grep -q "machine:" "$dir/e.out" \
    || fail "wte profile ${args%%|*}: rc $rc, stdout $(head -c 200 "$dir/e.out"), stderr $(cat "$dir/e.err")"
done

# wte profile loss: fused (two block heights, V not a multiple of the tile) and unfused at a small
# shape; both agree, every path reports a time and a peak-memory growth.
"$WTE_CLI" profile loss --vocab-size 300 --d-model 16 --n-tokens 100 --loss-chunk 7,64 \
  --loss-vocab-tile 64 --threads 2 --repeat 2 --json "$dir/loss.json" > "$dir/loss.txt" 2>&1 \
  || fail "profile loss exited $?: $(cat "$dir/loss.txt")"
grep -q "fused 7 x 64" "$dir/loss.txt" && grep -q "unfused" "$dir/loss.txt" || fail "profile loss table"
/usr/bin/python3 - "$dir/loss.json" <<'PY' || fail "loss json"
import json, sys
j = json.load(open(sys.argv[1]))
assert (j["N"], j["V"], j["C"]) == (100, 300, 16), j
paths = {p["path"]: p for p in j["paths"]}
assert set(paths) == {"fused 7 x 64", "fused 64 x 64", "unfused"}, paths
for p in paths.values():
    assert p["ms"] > 0 and p["peak_rss_growth_bytes"] >= 0, p
for name in ("fused 7 x 64", "fused 64 x 64"):
    p = paths[name]
    # one block's logits, and at 2 threads 8 groups of tiles: their row statistics and 7 partial dh
    groups = 4 * j["threads"]
    assert p["workspace_bytes"] == 4 * (p["rows"] * 300 + 3 * p["rows"] * groups +
                                        (groups - 1) * p["rows"] * 16), p
    assert max(p["max_rel_diff_loss"], p["max_rel_diff_dh"], p["max_rel_diff_dW"]) < 1e-4, p
PY

set +e
"$WTE_CLI" profile scatter --dist zipf:-1 > /dev/null 2> "$dir/e1.txt"; rc=$?
[ $rc = 2 ] && grep -q "zipf:-1" "$dir/e1.txt" || fail "bad --dist: rc $rc, $(cat "$dir/e1.txt")"
"$WTE_CLI" profile scatter --strategy fastest > /dev/null 2> "$dir/e2.txt"; rc=$?
[ $rc = 2 ] && grep -q "fastest" "$dir/e2.txt" || fail "bad --strategy: rc $rc"
"$WTE_CLI" profile scatter --vocab-size 5 --dist file:"$dir/ids.bin" > /dev/null 2> "$dir/e3.txt"; rc=$?
# ids 5 7 5 with vocab 5: the first bad id is 5, at position 0.
[ $rc = 1 ] && grep -q "token id 5 at position 0" "$dir/e3.txt" && grep -q "vocab_size=5" "$dir/e3.txt" \
  || fail "out-of-range id in file: rc $rc, $(cat "$dir/e3.txt")"
echo "ok"
