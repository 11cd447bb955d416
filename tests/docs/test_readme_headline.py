#!/usr/bin/python3
"""README.md's performance table is what bench/headline.py builds from bench/results/: the table
between <!-- headline:begin ... --> and <!-- headline:end --> must equal the script's output, and
every results file it links must exist. Run bench/headline.py --write README.md after adding
results. The README stays a short front page: at most README_MAX_LINES lines besides the
generated table, which grows by a row group per ISA class measured (the reference lives in
docs/)."""
import os
import re
import subprocess
import sys

SRC = os.environ.get("WTE_SOURCE_DIR")
if not SRC:  # the repository: the nearest folder above this file that holds README.md
    SRC = os.path.dirname(os.path.abspath(__file__))
    while not os.path.isfile(os.path.join(SRC, "README.md")) and SRC != "/":
        SRC = os.path.dirname(SRC)

r = subprocess.run([sys.executable, os.path.join(SRC, "bench", "headline.py"), "--check",
                    os.path.join(SRC, "README.md")], capture_output=True, text=True)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
if r.returncode != 0:
    sys.exit("FAIL: README.md's headline table differs from bench/headline.py's (see above)")
readme = open(os.path.join(SRC, "README.md")).read()
README_MAX_LINES = 400
table_lines = readme[readme.index("<!-- headline:begin"):readme.index("<!-- headline:end")].count("\n")
lines = readme.count("\n") - table_lines
if lines > README_MAX_LINES:
    sys.exit("FAIL: README.md has %d lines besides the headline table, more than %d: move "
             "reference material into docs/" % (lines, README_MAX_LINES))
links = re.findall(r"\]\((bench/results/[^)]+)\)", readme)
if not links:
    sys.exit("FAIL: README.md's headline table links no results file")
for link in links:
    if not os.path.isfile(os.path.join(SRC, link)):
        sys.exit("FAIL: README.md links %s, which does not exist" % link)
print("2 passed, 0 failed")
