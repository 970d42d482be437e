#!/bin/sh
# Manual pages: both lint clean, the key reference of shardtrain.ini(5)
# documents every key the schema knows, and shardtrain(1) documents every
# subcommand and option the binary accepts.
. "$top_srcdir/tests/lib.sh"

require test -n "${MANDOC:-}"
ini5="$top_builddir/man/shardtrain.ini.5"
man1="$top_srcdir/man/shardtrain.1"
check "shardtrain.ini.5 was generated" test -s "$ini5"
for page in "$man1" "$ini5"; do
    out=$("$MANDOC" -T lint -W warning "$page" 2>&1)
    if [ -z "$out" ]; then ok "mandoc lint clean: ${page##*/}"; else not_ok "mandoc lint: ${page##*/}"; diag "$out"; fi
done

# Render the ini(5) page and look for each key as a documented item.
rendered=$("$MANDOC" -T ascii -O width=200 "$ini5" | sed "s/.\x08//g")
undocumented=
n=0
for key in $("$SHARDTRAIN" keys); do
    n=$((n + 1))
    name=${key#*.}
    section=${key%%.*}
    # The section heading and the key must both appear.
    printf '%s\n' "$rendered" | grep -q "\[$section\]" || undocumented="$undocumented $key"
    printf '%s\n' "$rendered" | grep -Eq "^ +$name( |$)" || undocumented="$undocumented $key"
done
check "schema lists keys ($n)" test "$n" -ge 40
if [ -z "$undocumented" ]; then ok "every schema key is documented in shardtrain.ini(5)"
else not_ok "undocumented keys:$undocumented"; fi

# Every subcommand and option in --help appears in shardtrain(1).
help=$("$SHARDTRAIN" --help)
missing=
for word in $(printf '%s\n' "$help" | grep -oE 'shardtrain [a-z][a-z-]+|--[a-z-]+' | sed 's/^shardtrain //' | sort -u); do
    grep -q -- "$(printf '%s' "$word" | sed 's/^--/Fl -/')" "$man1" || grep -q "Cm $word" "$man1" ||
        missing="$missing $word"
done
if [ -z "$missing" ]; then ok "shardtrain(1) documents every subcommand and option of --help"
else not_ok "missing from shardtrain(1):$missing"; fi
