"""Rewrite each CUDA launch `kernel<...><<<grid, block[, smem, stream]>>>(args)`
of a .cu file into `(emu_check_args("kernel", emu_instance<&kernel<...>>(),
emu_param_kinds<&kernel<...>>(), (cudaStream_t)(stream), args),
emu_launch(dim3(grid), dim3(block), [=]() { kernel<...>(args); }, smem,
emu_kernel_key<&kernel<...>>()))`
so g++ can compile it against shim.h (the host emulation of the CUDA
features the kernels use).  The kernel expression is the identifier (with
optional template arguments) right before `<<<`, which may sit on the
previous line; grid, block, the dynamic shared-memory size and the stream
are the four top-level fields of the launch configuration (0 for those
left out).  The emulation still runs everything in order on the host; the
stream is for the race check (races.c, where linked), which
emu_param_kinds tells which pointer parameters the kernel reads (to const)
and writes.  emu_check_args checks
that every pointer argument is device memory, where a block table is
linked (the emulated shardtrain); emu_instance gives the template
arguments the launch instantiates (their values, as `<float, true>`), which
a record of the launch carries beside the kernel's name as written.

A kernel declared `__global__ void __launch_bounds__(E) name(...) {` loses
the attribute and opens with `if (emu_launch_bound(E)) return;`, and its
launches in the same file pass emu_launch one more argument, true: the
emulation then runs the kernel once in a probe that returns at that line
with E, and refuses a block larger than E, as a device does (see
emu_launch_bound in shim.h).  A launch of a bounded kernel from another
file still hits the line, which then aborts on a block over E.

A `#include "NAME.cuh"` of a header beside the .cu file is replaced by the
header's text (rewritten the same way, its own such includes inlined in
turn, each header once: the later includes of it are dropped, as its
include guard would), so that launches and static `__shared__` arrays in
kernel headers (cuda/common.cuh's column-sum finisher) are followed like
the file's own.  Other includes stay includes.

Every line of the output keeps its source's line number, through `#line`
directives (one opening the file, one at each end of an inlined header)
and rewrites that add no line: a launch's rewrite is put on the launch's
first line and followed by as many newlines as the launch spanned.  So a
compiler message, a debugger and gcov (tests/gpu/emu/coverage.py) name the
line of cuda/ that the emulation compiled, not one of the rewritten file;
tests/emu_transform.sh checks it."""
import os
import re
import sys


def inline_local_headers(text, folder, seen, parent):
    """text (the file parent) with each `#include "X.cuh"` of a file in
    folder replaced by that file's text, recursively, between #line
    directives that keep both files' line numbers; a header already in seen
    becomes a comment."""
    def one(m):
        path = os.path.join(folder, m.group(1))
        if not os.path.isfile(path):
            return m.group(0)
        if path in seen:
            return '/* %s: inlined above */' % m.group(1)
        seen.add(path)
        body = inline_local_headers(open(path).read(), folder, seen, path)
        # The include's own line is text.count('\n', 0, m.start()) + 1;
        # the parent resumes on the line after it.
        resume = text.count('\n', 0, m.start()) + 2
        return '/* ---- %s, inlined ---- */\n#line 1 "%s"\n%s\n#line %d "%s"\n' \
            '/* ---- end of %s ---- */' % (m.group(1), path, body.rstrip('\n'), resume - 1,
                                         parent, m.group(1))
    return re.sub(r'^[ \t]*#[ \t]*include[ \t]+"([\w.]+\.cuh)"[^\n]*$', one, text, flags=re.M)


source = os.path.abspath(sys.argv[1])
s = '#line 1 "%s"\n' % source + inline_local_headers(open(source).read(),
                                                   os.path.dirname(source), set(), source)
name_re = re.compile(r'\b\w+(?:\s*<[^;{}()<>]*>)?\s*$')


def split_top(text):
    """Split at commas outside parentheses and angle-free brackets."""
    parts, depth, cur = [], 0, ''
    for ch in text:
        if ch in '([':
            depth += 1
        elif ch in ')]':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def close_paren(text, p):
    """Index of the parenthesis that closes the one at text[p]."""
    depth = 0
    while True:
        if text[p] == '(':
            depth += 1
        elif text[p] == ')':
            depth -= 1
            if depth == 0:
                return p
        p += 1


def strip_launch_bounds(text):
    """Move each kernel's __launch_bounds__ into a check in its body, and
    return the rewritten text with the names of the bounded kernels."""
    out, names, i = [], set(), 0
    lb = re.compile(r'__global__\s+void\s+__launch_bounds__\s*\(')
    while True:
        m = lb.search(text, i)
        if not m:
            out.append(text[i:])
            return ''.join(out), names
        a = m.end() - 1
        b = close_paren(text, a)
        bound = text[a + 1:b]
        n = re.compile(r'\s*(\w+)\s*\(').match(text, b + 1)
        assert n, 'no kernel name after __launch_bounds__ at offset %d' % b
        names.add(n.group(1))
        q = close_paren(text, n.end() - 1) + 1
        while text[q] in ' \t\n':
            q += 1
        out.append(text[i:m.start()] + '__global__ void' + text[b + 1:q])
        if text[q] == '{':
            out.append('{ if (emu_launch_bound(%s)) return;' % bound)
            q += 1
        i = q


def note_static_shared(text):
    """Follow each static `__shared__ T a[...], b[...];` declaration (one
    line, not extern) with emu_static_smem(&a, sizeof a) per array, on the
    same line, so the emulation can hold a block's static shared memory to
    the device's limits (see emu_static_smem in shim.h)."""
    decl = re.compile(r'^([ \t]*__shared__\s+(?!.*\bextern\b)([^;{}()]*);)', re.M)

    def note(m):
        names = []
        for part in split_top(re.sub(r'\[[^\]]*\]', '', m.group(2))):
            n = re.search(r'(\w+)\s*$', part)
            assert n, 'no array name in __shared__ declaration: %s' % m.group(1)
            names.append(n.group(1))
        return m.group(1) + ''.join(' emu_static_smem(&%s, sizeof %s);' % (n, n) for n in names)
    return decl.sub(note, text)


s = note_static_shared(s)
s, bounded = strip_launch_bounds(s)
out, i = [], 0
while True:
    j = s.find('<<<', i)
    if j < 0:
        out.append(s[i:])
        break
    m = name_re.search(s, i, j)
    assert m, 'no kernel name before <<< at offset %d' % j
    name = s[m.start():j].strip()
    e = s.find('>>>', j)
    cfg = split_top(s[j + 3:e])
    p = e + 3
    while s[p] in ' \t\n':
        p += 1
    assert s[p] == '(', 'no argument list after >>> at offset %d' % e
    a = p
    p = close_paren(s, p)
    args = s[a + 1:p]
    out.append(s[i:m.start()])
    smem = cfg[2] if len(cfg) > 2 else '0'
    stream = cfg[3] if len(cfg) > 3 else '0'
    launch = ('(emu_check_args("%s", emu_instance<&%s>(), emu_param_kinds<&%s>(), '
              '(cudaStream_t)(%s)%s), '
              'emu_launch(dim3(%s), dim3(%s), [=]() { %s(%s); }, %s, emu_kernel_key<&%s>()%s))'
              % (name.replace('"', "'"), name, name, stream, (', ' + args) if args.strip() else '',
                 cfg[0], cfg[1], name, args, smem, name,
                 ', true' if re.match(r'\w+', name).group(0) in bounded else ''))
    # One line for the rewrite, then the lines the launch spanned, so the
    # text after it stays on its source line (a // comment inside the
    # launch would swallow the rest of that line).
    spanned = s[m.start():p + 1]
    assert '//' not in spanned, 'a // comment inside the launch at offset %d' % j
    out.append(launch.replace('\n', ' ') + '\n' * spanned.count('\n'))
    i = p + 1
print(''.join(out))
