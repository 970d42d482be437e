"""Checks that transform.py's output keeps its sources' line numbers.

Usage: transform_lines.py SOURCE.cu < OUTPUT  (transform.py's output of SOURCE)

Follows the output's #line directives and holds each output line against
the source line they map it to.  Each must be the same text, or one of the
rewrites transform.py makes: a launch (the rewritten line holds emu_launch,
on the line of the kernel's name, which may be the line before the <<<,
and the lines the launch spanned follow, empty but for what followed its
closing parenthesis on its last line), a kernel's
__launch_bounds__ moved into its body, a static __shared__ declaration
noted with emu_static_smem, the comments around an inlined header, and a
header's later include dropped.  One line per mismatch on stderr, exit
status 1; else one summary line and 0.  Why it matters: gcov
(coverage.py), compiler messages and a debugger name cuda/'s lines only
through these directives, so one line lost or gained shifts everything
after it, and a coverage report would then mark the wrong lines."""
import os
import re
import sys

directive = re.compile(r'^#line (\d+) "([^"]+)"$')
marker = re.compile(r'^/\* (---- [\w.]+, inlined ----|---- end of [\w.]+ ----|[\w.]+: inlined above) \*/$')

sources = {}


def source_line(path, n):
    if path not in sources:
        with open(path) as f:
            sources[path] = f.read().split('\n')
    lines = sources[path]
    return lines[n - 1] if 1 <= n <= len(lines) else None


def main():
    bad = checked = 0
    path, n = None, None
    in_launch = False
    text = sys.stdin.read().rstrip('\n')
    for out in text.split('\n'):
        d = directive.match(out)
        if d:
            n, path = int(d.group(1)), d.group(2)
            in_launch = False
            continue
        if path is None:
            print('transform_lines: output line before the first #line: %r' % out, file=sys.stderr)
            return 1
        src = source_line(path, n)
        ok = src is not None and (
            out == src or
            marker.match(out) or
            ('emu_launch(' in out and '<<<' in src + (source_line(path, n + 1) or '')) or
            (in_launch and src.endswith(out)) or
            ('__launch_bounds__' in src and '__launch_bounds__' not in out) or
            ('emu_launch_bound(' in out) or
            ('emu_static_smem(' in out and out.startswith(src)))
        if 'emu_launch(' in out:
            in_launch = True
        elif out != '':
            in_launch = False
        if not ok:
            bad += 1
            if bad <= 10:
                print('transform_lines: %s:%d: the output has %r, the source %r' %
                      (os.path.basename(path), n, out[:80], (src or '<past the end>')[:80]),
                      file=sys.stderr)
        checked += 1
        n += 1
    if bad:
        print('transform_lines: %d of %d lines off their source line' % (bad, checked),
              file=sys.stderr)
        return 1
    print('%d lines, each on its source line' % checked)
    return 0


sys.exit(main())
