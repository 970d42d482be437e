#!/bin/sh
# The layers of src/ hold: every `#include "FOLDER/..."` in src/X/ names X
# itself or a folder that X's paragraph in src/README allows ("May include
# a, b (file.h only), c."), so the house the README describes is the house
# the code builds.  One check per folder, plus one that every folder of
# src/ has a paragraph.
. "$top_srcdir/tests/lib.sh"

python3 - "$top_srcdir/src" <<'EOF_PY' >"$TMP/layers.tap"
import os, re, sys
src = sys.argv[1]
text = open(os.path.join(src, "README")).read()
# a paragraph starts with "name/" at the start of a line
paras = re.split(r"^(?=[a-z]+/ )", text, flags=re.M)
allowed = {}
for p in paras[1:]:
    name = p.split("/", 1)[0]
    m = re.search(r"May\s+include\s+(.*?)\.(\s|$)", p, re.S)
    rules = {}
    if m and not m.group(1).strip().startswith("nothing"):
        for item in re.split(r",|\band\b", m.group(1).replace("\n", " ")):
            item = " ".join(item.split())
            if not item:
                continue
            mm = re.match(r"([a-z]+)(?: \(([\w.]+) only\))?$", item)
            if not mm:
                print("not ok - src/README: cannot read '%s' in %s/'s paragraph" % (item, name))
                continue
            rules[mm.group(1)] = mm.group(2)  # None = any header of that folder
    allowed[name] = rules
folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
missing = [d for d in folders if d not in allowed]
print(("ok" if not missing else "not ok") + " - every folder of src/ has a paragraph in src/README"
      + ("" if not missing else ": missing " + ", ".join(missing)))
inc = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)
for d in folders:
    bad = []
    for f in sorted(os.listdir(os.path.join(src, d))):
        if not f.endswith((".c", ".h")):
            continue
        for t, h in inc.findall(open(os.path.join(src, d, f)).read()):
            if t == d or t not in folders:
                continue  # own folder; cuda/'s headers are not src/ layers
            rule = allowed.get(d, {})
            if t not in rule or (rule[t] is not None and rule[t] != h):
                bad.append("%s/%s includes %s/%s" % (d, f, t, h))
    print(("ok" if not bad else "not ok") + " - %s/ includes only what src/README allows" % d
          + ("" if not bad else ": " + "; ".join(bad)))
EOF_PY
while IFS= read -r line; do
    case $line in
        "ok - "*) ok "${line#ok - }" ;;
        *) not_ok "${line#not ok - }" ;;
    esac
done <"$TMP/layers.tap"
[ -s "$TMP/layers.tap" ] || not_ok "the layer check printed nothing"
