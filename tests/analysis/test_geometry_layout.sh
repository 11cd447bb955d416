#!/usr/bin/env bash
# The layout of the page `wte geometry --out DIR` writes, as a reader sees it in headless Chromium
# at 1280x800 (a laptop screen):
#   - above the fold (within the first 800 px): the title, the summary box and the whole
#     nearest-neighbour table (first | last step), with the never-seen tokens named in the summary;
#   - every picture loaded: each figure holds an inline SVG or an <img> that decoded, with a size;
#   - every number of the summary box is the value geometry.json holds at its data-key, rounded as
#     shown (so the page and the JSON cannot disagree);
#   - a model without transformer blocks gets no "Hidden states per layer" section; a model with
#     blocks gets one row per layer (its raw and centred histograms side by side) and integer
#     ticks on the layer axis;
#   - the effective-rank chart has a log y axis, and the PCA strip shows the step where k-NN purity
#     changes most (geometry.json's strip_steps).
# A negative control changes one number of geometry.json; the comparison must notice.
# Needs: WTE_CLI, WTE_SOURCE_DIR, WTE_BINARY_DIR (set by ctest); chromium; /usr/bin/python3.
set -euo pipefail

for tool in chromium /usr/bin/python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed, so the page's layout cannot be checked" \
         "(apt-get install chromium python3; scripts/quickstart.sh test installs them)"
    exit 77
  fi
done

work="$WTE_BINARY_DIR/test_tmp/geometry_layout"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

/usr/bin/python3 "$WTE_SOURCE_DIR/datasets/make_planted.py" --documents 60 --out "$work/planted" >/dev/null
common=(--config "$WTE_SOURCE_DIR/configs/planted.ini" --data.text="$work/planted/planted.txt"
        --data.tokenizer="$work/planted/tokenizer" --model.d_model=16 --train.batch_size=4
        --train.eval_interval=10 -q)
# No blocks: the embedding-only model. Snapshots at every step of the first 12, so the strip must choose.
"$WTE_CLI" train "${common[@]}" --model.n_layer=0 --train.steps=40 \
  --train.snapshot_steps=0,1,2,3,4,5,6,8,10,12,20,30 --out "$work/run0" >/dev/null
"$WTE_CLI" geometry --checkpoint "$work/run0" --labels "$work/planted/labels.tsv" \
  --query " cat, red" --out "$work/geo0" >/dev/null
# One block: the hidden states per layer section.
"$WTE_CLI" train "${common[@]}" --model.n_layer=1 --model.n_head=2 --train.steps=20 \
  --train.snapshot_steps=0,10 --out "$work/run1" >/dev/null
"$WTE_CLI" geometry --checkpoint "$work/run1" --labels "$work/planted/labels.tsv" \
  --context-tokens 256 --out "$work/geo1" >/dev/null
for d in geo0 geo1; do
  [ -s "$work/$d/geometry.json" ] || fail "wte geometry wrote no $d/geometry.json"
done

cat > "$work/probe.js" <<'JS'
window.addEventListener("load", () => {
  const lines = [];
  const box = (sel) => {
    const e = document.querySelector(sel);
    if (!e) return "none";
    const r = e.getBoundingClientRect();
    return Math.round(r.top + window.scrollY) + " " + Math.round(r.bottom + window.scrollY);
  };
  lines.push("VIEWPORT " + window.innerWidth + " " + window.innerHeight);
  lines.push("SUMMARY " + box("#summary"));
  lines.push("NEIGHBOURS " + box("#neighbours"));
  lines.push("NEIGHBOURROWS " + document.querySelectorAll("#neighbours tr").length);
  lines.push("PAGEHEIGHT " + document.documentElement.scrollHeight);
  for (const e of document.querySelectorAll("[data-key]"))
    lines.push("KEY " + e.dataset.key + " " + e.textContent);
  let loaded = 0, broken = [];
  for (const f of document.querySelectorAll("figure")) {
    const svg = f.querySelector(":scope > svg"), img = f.querySelector(":scope > img");
    const r = (svg || img || f).getBoundingClientRect();
    const ok = (svg && r.width > 0 && r.height > 0) ||
               (img && img.complete && img.naturalWidth > 0 && r.width > 0);
    if (ok) loaded++; else broken.push(f.dataset.file);
  }
  lines.push("FIGURES " + document.querySelectorAll("figure").length + " loaded " + loaded +
             " broken " + (broken.join(",") || "-"));
  lines.push("IMAGES " + [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).length +
             " not loaded of " + document.images.length);
  for (const h of document.querySelectorAll("h2")) lines.push("H2 " + h.textContent);
  for (const f of document.querySelectorAll('figure[data-file^="context_layer_"]')) {
    const r = f.getBoundingClientRect();
    lines.push("CTX " + f.dataset.file + " " + Math.round(r.left) + " " + Math.round(r.top + window.scrollY));
  }
  const layers = document.querySelector('figure[data-file="context_layers.svg"] svg');
  if (layers) lines.push("LAYERTICKS " + [...layers.querySelectorAll("g.xtick text")].map(
                         t => t.textContent).join("|"));
  const rank = document.querySelector('figure[data-file="series_rank.svg"] svg');
  if (rank) lines.push("RANKYLABEL " + [...rank.querySelectorAll("text")].map(t => t.textContent).filter(
                       t => t.startsWith("participation")).join("|"));
  const strip = document.querySelector('figure[data-file="pca_strip.svg"] svg');
  if (strip) lines.push("STRIP " + [...strip.querySelectorAll("svg > svg > text")].map(
                        t => t.textContent).filter(t => t.startsWith("step ")).join("|"));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = lines.join("\n") + "\n";
  document.body.appendChild(out);
});
JS

# probe DIR: DIR/index.html with the probe script appended, opened at 1280x800; one fact a line.
probe() {
  local dir="$1" profile
  profile="$(mktemp -d)"
  sed 's#</body>#<script src="probe.js"></script></body>#' "$dir/index.html" > "$dir/probe.html"
  cp "$work/probe.js" "$dir/probe.js"
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size=1280,800 --hide-scrollbars \
    --run-all-compositor-stages-before-draw --virtual-time-budget=10000 --dump-dom \
    "file://$dir/probe.html" 2>/dev/null | sed -n '/<pre id="probe">/,/<\/pre>/p' \
    | sed 's/<pre id="probe">//; s#</pre>.*##' | grep -E '^[A-Z0-9]+ ' || true
  rm -rf "$profile"
}

# compare RESULT JSON: every KEY line's number equals JSON's value at that key, rounded as shown.
compare() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
result, data = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2]))
keys = [l.split(" ", 2)[1:] for l in result if l.startswith("KEY ")]
assert len(keys) >= 8, "too few numbers in the summary: %r" % keys
for key, shown in keys:
    v = data
    for part in key.split("."):
        v = v[part]
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    expected = ("%d" % v) if isinstance(v, int) else ("%.*f" % (decimals, v))
    if expected.startswith("-") and not expected.strip("-0."):
        expected = expected[1:]  # the page prints a rounded zero without its sign
    if shown != expected:
        sys.exit("summary shows %s = %s but geometry.json has %r (%s)" % (key, shown, v, expected))
print("%d summary numbers equal geometry.json" % len(keys))
PY
}

r0="$(probe "$work/geo0")"
echo "$r0"
printf '%s\n' "$r0" > "$work/geo0.probe"
# The layout depends on the width only (no vh units); with --dump-dom Chromium's viewport may be
# shorter than the window, so the fold is measured from the top of the page: 800 px.
grep -q '^VIEWPORT 1280 ' <<<"$r0" || fail "the window is not 1280 px wide"
read -r _ s_top s_bottom < <(grep '^SUMMARY ' <<<"$r0")
read -r _ n_top n_bottom < <(grep '^NEIGHBOURS ' <<<"$r0")
[ "$s_top" != "none" ] || fail "the page has no summary box"
[ "$n_top" != "none" ] || fail "the page has no neighbour table"
[ "$s_bottom" -le 800 ] || fail "the summary box ends at $s_bottom px, below the fold (800)"
[ "$n_bottom" -le 800 ] || fail "the neighbour table ends at $n_bottom px, below the fold (800)"
[ "$s_bottom" -le "$n_top" ] || fail "the neighbour table is not below the summary"
grep -qE '^NEIGHBOURROWS ([4-9]|[1-9][0-9])$' <<<"$r0" || fail "the neighbour table has too few rows"
grep -q '^KEY never_seen.count [1-9]' <<<"$r0" || fail "the summary does not count the never-seen tokens"
grep -q '^KEY knn_purity.last ' <<<"$r0" || fail "the summary shows no k-NN purity with labels"
grep -q '^KEY loss.first ' <<<"$r0" || fail "the summary shows no loss"
grep -qE '^FIGURES ([0-9]+) loaded \1 broken -$' <<<"$r0" || fail "a picture did not load"
grep -q '^IMAGES 0 not loaded' <<<"$r0" || fail "an <img> did not load"
if grep -q '^H2 Hidden states per layer' <<<"$r0"; then
  fail "a model without blocks has a hidden-states section"
fi
grep -q '^RANKYLABEL participation ratio, log scale' <<<"$r0" || fail "effective rank is not on a log axis"
compare <(printf '%s\n' "$r0") "$work/geo0/geometry.json" || fail "the summary and geometry.json differ"
# The strip shows the steps geometry.json names, among them the two around purity's largest change.
/usr/bin/python3 - "$work/geo0/geometry.json" "$(grep '^STRIP ' <<<"$r0" | cut -d' ' -f2-)" <<'PY' \
  || fail "the PCA strip does not show the step where purity changes most"
import json, sys
j, shown = json.load(open(sys.argv[1])), sys.argv[2]
strip = j["strip_steps"]
assert shown == "|".join("step %d" % s for s in strip), (shown, strip)
p = [(s["step"], s["knn_purity"]) for s in j["steps"]]
i = max(range(len(p) - 1), key=lambda i: abs(p[i + 1][1] - p[i][1]))
assert p[i + 1][0] in strip, ("purity jumps from step %d to %d" % (p[i][0], p[i + 1][0]), strip)
print("strip steps", strip, "include step", p[i + 1][0], "after the largest purity change")
PY

r1="$(probe "$work/geo1")"
echo "$r1"
grep -q '^H2 Hidden states per layer' <<<"$r1" || fail "a model with a block has no hidden-states section"
grep -qE '^FIGURES ([0-9]+) loaded \1 broken -$' <<<"$r1" || fail "a picture of the block model did not load"
grep -qE '^LAYERTICKS [0-9]+(\|[0-9]+)*$' <<<"$r1" || fail "the layer axis has ticks that are not integers"
compare <(printf '%s\n' "$r1") "$work/geo1/geometry.json" || fail "the summary and geometry.json differ"
n_layers=0
while read -r _ file left top; do
  other="${file/_raw/_centred}"
  [ "$other" != "$file" ] || continue
  read -r _ _ left2 top2 < <(grep "^CTX $other " <<<"$r1")
  [ "$top" = "$top2" ] && [ "$left" -lt "$left2" ] \
    || fail "$file and $other are not one row (raw left, centred right): $left,$top and $left2,$top2"
  n_layers=$((n_layers + 1))
done < <(grep '^CTX .*_raw.svg ' <<<"$r1")
[ "$n_layers" -ge 2 ] || fail "expected a row for each of at least 2 layers, found $n_layers"

# Negative control: one number of the JSON changed must be noticed.
/usr/bin/python3 - "$work/geo0/geometry.json" "$work/broken.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["anisotropy"]["last"] += 0.01
json.dump(j, open(sys.argv[2], "w"))
PY
if compare <(printf '%s\n' "$r0") "$work/broken.json" >/dev/null 2>&1; then
  fail "the comparison did not notice a changed number"
fi
echo "PASS: at 1280x800 the summary (ends at $s_bottom px) and the neighbour table (ends at" \
     "$n_bottom px) are above the fold, every picture loaded, the summary's numbers are" \
     "geometry.json's; no context section without blocks, one row per layer with blocks"
