#!/usr/bin/env bash
# `wte geometry --out DIR` writes DIR/index.html showing every picture. This test opens that page in
# headless Chromium (Debian's `chromium`) and checks, after the page's load event, that every <img>
# loaded and decoded (naturalWidth > 0) and that the page shows every SVG in DIR; it also renders
# each SVG to PNG with rsvg-convert (librsvg2-bin), which fails on malformed SVG. A negative control
# deletes one picture and requires the same check to report it, so the check can fail.
# Needs: WTE_CLI, WTE_SOURCE_DIR, WTE_BINARY_DIR (set by ctest); /usr/bin/python3 for the generator.
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

/usr/bin/python3 "$WTE_SOURCE_DIR/datasets/make_planted.py" --documents 60 --out "$work/planted" >/dev/null
"$WTE_CLI" train --config "$WTE_SOURCE_DIR/configs/planted.ini" \
  --data.text="$work/planted/planted.txt" --data.tokenizer="$work/planted/tokenizer" \
  --model.d_model=16 --train.steps=8 --train.batch_size=4 --train.eval_interval=0 \
  --train.snapshot_steps=0,4,8 -q --out "$work/run" >/dev/null
"$WTE_CLI" geometry --checkpoint "$work/run" --labels "$work/planted/labels.tsv" \
  --out "$work/geo" >/dev/null

# Every SVG renders to a non-empty PNG.
n_svg=0
for svg in "$work"/geo/*.svg; do
  rsvg-convert -o "${svg%.svg}.png" "$svg"
  [ -s "${svg%.svg}.png" ] || { echo "FAIL: rsvg-convert made no PNG of $svg"; exit 1; }
  n_svg=$((n_svg + 1))
done
[ "$n_svg" -ge 7 ] || { echo "FAIL: expected at least 7 pictures, found $n_svg"; exit 1; }

# check_page DIR: opens DIR/index.html (with a probe script appended to a copy) in headless
# Chromium; prints one line per <img>: "OK src WxH" or "BAD src", then "IMAGES n".
check_page() {
  local dir="$1" profile
  profile="$(mktemp -d)"
  sed 's#</body>#<script>window.addEventListener("load", () => { const out = document.createElement("pre"); out.id = "probe"; let s = ""; const imgs = document.querySelectorAll("img"); for (const i of imgs) { const name = i.getAttribute("src"); s += (i.complete \&\& i.naturalWidth > 0 ? "OK " + name + " " + i.naturalWidth + "x" + i.naturalHeight : "BAD " + name) + "\\n"; } s += "IMAGES " + imgs.length + "\\n"; out.textContent = s; document.body.appendChild(out); });</script></body>#' \
    "$dir/index.html" > "$dir/probe.html"
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --virtual-time-budget=10000 --dump-dom \
    "file://$dir/probe.html" 2>/dev/null | sed -n '/<pre id="probe">/,/<\/pre>/p' \
    | sed 's/<pre id="probe">//; s#</pre>.*##' | grep -E '^(OK|BAD|IMAGES) ' || true
  rm -rf "$profile"
}

result="$(check_page "$work/geo")"
echo "$result"
grep -q "^IMAGES $n_svg\$" <<<"$result" || { echo "FAIL: the page shows not $n_svg images"; exit 1; }
if grep -q '^BAD ' <<<"$result"; then echo "FAIL: a picture did not load"; exit 1; fi
for svg in "$work"/geo/*.svg; do
  name="$(basename "$svg")"
  grep -q "^OK $name 640x440\$" <<<"$result" || { echo "FAIL: $name is not shown"; exit 1; }
done

# Negative control: with one picture missing the same check must report it.
cp -r "$work/geo" "$work/geo_broken"
rm "$work/geo_broken/cosines.svg"
broken="$(check_page "$work/geo_broken")"
grep -q '^BAD cosines.svg$' <<<"$broken" || {
  echo "FAIL: the check did not notice a missing picture:"; echo "$broken"; exit 1; }
echo "PASS: index.html loads in headless Chromium and shows all $n_svg pictures;" \
     "a missing one is reported"
