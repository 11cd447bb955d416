#!/usr/bin/env bash
# `wte geometry --out DIR` writes DIR/index.html with every picture inline (SVG in the page, so the
# per-point tooltips work). This test trains a short planted run whose snapshots are log-spaced and
# whose final checkpoint is no snapshot, opens the page in headless Chromium at 1400 px and checks,
# after the load event:
#   - every SVG file of DIR is on the page inline (one <figure><svg> each), and has a size;
#   - the loss curve (loss.svg: training and validation loss) is there, with its polylines;
#   - a tooltip: a point's <title> in the last PCA is the token and class it stands for;
#   - the page's last step is the run's final checkpoint (step 40, checkpoint_00000040.h5);
#   - the series charts use a log step axis (the snapshots are log-spaced);
#   - the layout: two figures side by side, each at most 700 px wide, nothing wider than 1400 px.
# geometry.csv parses as CSV although the run directory's name holds a comma (RFC 4180 quoting).
# Every SVG also renders with rsvg-convert (librsvg2-bin), which fails on malformed SVG, and parses
# as XML. A negative control removes one figure from a copy of the page; the check must notice.
# Needs: WTE_CLI, WTE_SOURCE_DIR, WTE_BINARY_DIR (set by ctest); /usr/bin/python3.
set -euo pipefail

for tool in chromium rsvg-convert /usr/bin/python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed (apt-get install chromium librsvg2-bin python3;" \
         "scripts/quickstart.sh test installs them)"
    exit 77
  fi
done

work="$WTE_BINARY_DIR/test_tmp/geometry_html"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

/usr/bin/python3 "$WTE_SOURCE_DIR/datasets/make_planted.py" --documents 60 --out "$work/planted" >/dev/null
"$WTE_CLI" train --config "$WTE_SOURCE_DIR/configs/planted.ini" \
  --data.text="$work/planted/planted.txt" --data.tokenizer="$work/planted/tokenizer" \
  --model.d_model=16 --train.steps=40 --train.batch_size=4 --train.eval_interval=10 \
  --train.snapshot_steps=0,1,3,10,30 -q --out "$work/run,1" >/dev/null
[ -s "$work/run,1/loss.svg" ] || fail "wte train wrote no loss.svg beside metrics.csv"
"$WTE_CLI" geometry --checkpoint "$work/run,1" --labels "$work/planted/labels.tsv" \
  --out "$work/geo" >/dev/null
# geometry.csv is RFC 4180: the comma in the run directory's name does not shift the columns.
/usr/bin/python3 - "$work/geo/geometry.csv" <<'PY' || fail "geometry.csv does not parse as CSV"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert all(len(r) == len(rows[0]) == 8 for r in rows), rows
assert [r[0] for r in rows[1:]] == ["0", "1", "3", "10", "30", "40"], rows
assert rows[-1][7].endswith("run,1/checkpoint_00000040.h5"), rows[-1]
PY

# Every SVG parses as XML and renders to a non-empty PNG.
n_svg=0
for svg in "$work"/geo/*.svg; do
  /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$svg" \
    || fail "$svg is not well-formed XML"
  rsvg-convert -o "${svg%.svg}.png" "$svg"
  [ -s "${svg%.svg}.png" ] || fail "rsvg-convert made no PNG of $svg"
  n_svg=$((n_svg + 1))
done
[ "$n_svg" -ge 9 ] || fail "expected at least 9 pictures (loss, PCA x2, strip, cosines, norms, 3 series), found $n_svg"

# probe DIR: opens DIR/index.html (a copy with a probe script appended) in headless Chromium at
# 1400 px and prints what the page shows, one fact a line.
probe() {
  local dir="$1" profile
  profile="$(mktemp -d)"
  cat > "$work/probe.js" <<'JS'
window.addEventListener("load", () => {
  const lines = [];
  const figs = [...document.querySelectorAll("figure")];
  for (const f of figs) {
    const svg = f.querySelector(":scope > svg");
    const r = (svg || f).getBoundingClientRect();
    lines.push((svg ? "INLINE " : "NOSVG ") + f.dataset.file + " " + Math.round(r.width) + "x" +
               Math.round(r.height) + " at " + Math.round(r.left) + "," + Math.round(r.top));
  }
  lines.push("FIGURES " + figs.length);
  const loss = document.querySelector('figure[data-file="loss.svg"] svg');
  if (loss) lines.push("LOSS polylines " + loss.querySelectorAll("polyline").length + " legend " +
                       [...loss.querySelectorAll("text")].map(t => t.textContent).filter(
                           t => t.startsWith("train") || t.startsWith("validation")).join("|"));
  const pcas = [...document.querySelectorAll('figure[data-file^="pca_step_"]')];
  const last = pcas[pcas.length - 1];
  if (last) {
    lines.push("LASTPCA " + last.dataset.file + " title " + last.querySelector("svg text").textContent);
    const tip = last.querySelector("svg circle title");
    if (tip) lines.push("TOOLTIP " + tip.textContent);
  }
  const rank = document.querySelector('figure[data-file="series_rank.svg"] svg');
  if (rank) lines.push("RANKAXIS " + [...rank.querySelectorAll("text")].map(t => t.textContent).filter(
                           t => t.startsWith("step")).join("|"));
  lines.push("PAGEWIDTH " + document.documentElement.scrollWidth);
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = lines.join("\n") + "\n";
  document.body.appendChild(out);
});
JS
  sed 's#</body>#<script src="probe.js"></script></body>#' "$dir/index.html" > "$dir/probe.html"
  cp "$work/probe.js" "$dir/probe.js"
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size=1400,3000 --virtual-time-budget=10000 --dump-dom \
    "file://$dir/probe.html" 2>/dev/null | sed -n '/<pre id="probe">/,/<\/pre>/p' \
    | sed 's/<pre id="probe">//; s#</pre>.*##' | grep -E '^[A-Z]+ ' || true
  rm -rf "$profile"
}

result="$(probe "$work/geo")"
echo "$result"
grep -q "^FIGURES $n_svg\$" <<<"$result" || fail "the page has not $n_svg figures"
if grep -q '^NOSVG ' <<<"$result"; then fail "a figure is not an inline SVG"; fi
for svg in "$work"/geo/*.svg; do
  name="$(basename "$svg")"
  grep -qE "^INLINE $name [1-9][0-9]*x[1-9][0-9]* " <<<"$result" || fail "$name is not shown inline with a size"
done
# The loss curve: raw and averaged training loss and validation loss.
grep -qE '^LOSS polylines 3 legend train \(each step\)\|train \(moving avg\)\|validation$' <<<"$result" \
  || fail "the loss curve lacks its training and validation lines"
# The last step is the final checkpoint (40), not the last snapshot (30).
grep -q '^LASTPCA pca_step_00000040.svg title wte at step 40: PCA$' <<<"$result" \
  || fail "the page's last step is not the final checkpoint's (step 40)"
grep -q 'checkpoint_00000040.h5' "$work/geo/index.html" || fail "the final checkpoint is not in the numbers"
# A tooltip names the token and its class: the first labelled token of labels.tsv.
first_label="$(sed -n 2p "$work/planted/labels.tsv" | cut -f3)"
grep -qE "^TOOLTIP \".*\" \([0-9]+\) $first_label\$" <<<"$result" \
  || fail "the first point's tooltip does not name a token and its class '$first_label'"
grep -q '^RANKAXIS step (log scale)$' <<<"$result" || fail "the series charts have no log step axis"
# Layout at 1400 px: two figures share a row, each at most 700 px wide; no horizontal scrolling.
read -r w1 y1 < <(grep '^INLINE pca_step_00000000.svg' <<<"$result" | sed -E 's/.* ([0-9]+)x[0-9]+ at [0-9]+,([0-9]+)$/\1 \2/')
read -r w2 y2 < <(grep '^INLINE pca_step_00000040.svg' <<<"$result" | sed -E 's/.* ([0-9]+)x[0-9]+ at [0-9]+,([0-9]+)$/\1 \2/')
[ "$y1" = "$y2" ] || fail "the first and last PCA are not side by side (tops $y1, $y2)"
[ "$w1" -le 700 ] && [ "$w2" -le 700 ] || fail "a column is wider than 700 px ($w1, $w2)"
pw="$(grep '^PAGEWIDTH' <<<"$result" | cut -d' ' -f2)"
[ "$pw" -le 1400 ] || fail "the page is $pw px wide at a 1400 px window"

# Negative control: a page with one figure removed must fail the same check.
cp -r "$work/geo" "$work/geo_broken"
/usr/bin/python3 - "$work/geo_broken/index.html" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s2 = re.sub(r'<figure data-file="cosines.svg">.*?</figure>', '', s, count=1, flags=re.S)
assert s2 != s
open(p, "w").write(s2)
PY
broken="$(probe "$work/geo_broken")"
if grep -q "^INLINE cosines.svg " <<<"$broken" || grep -q "^FIGURES $n_svg\$" <<<"$broken"; then
  echo "$broken"; fail "the check did not notice a missing figure"
fi
echo "PASS: index.html shows all $n_svg pictures inline in two columns, the loss curve, tooltips," \
     "the final checkpoint and a log step axis; a missing figure is noticed"
