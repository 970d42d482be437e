"""Rewrite each CUDA launch `kernel<...><<<grid, block[, smem, stream]>>>(args)`
of a .cu file into `(emu_check_args("kernel", emu_instance<&kernel<...>>(), args),
emu_launch(dim3(grid), dim3(block), [=]() { kernel<...>(args); }, smem,
emu_kernel_key<&kernel<...>>()))`
so g++ can compile it against shim.h (the host emulation of the CUDA
features the kernels use).  The kernel expression is the identifier (with
optional template arguments) right before `<<<`, which may sit on the
previous line; grid, block and the dynamic shared-memory size are the first three
top-level fields of the launch configuration (the stream is dropped: the
emulation runs everything in order on the host).  emu_check_args checks
that every pointer argument is device memory, where a block table is
linked (the emulated shardtrain); emu_instance gives the template
arguments the launch instantiates (their values, as `<float, true>`), which
a record of the launch carries beside the kernel's name as written."""
import re
import sys

s = open(sys.argv[1]).read()
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
    a, depth = p, 0
    while True:
        if s[p] == '(':
            depth += 1
        elif s[p] == ')':
            depth -= 1
            if depth == 0:
                break
        p += 1
    args = s[a + 1:p]
    out.append(s[i:m.start()])
    smem = cfg[2] if len(cfg) > 2 else '0'
    out.append('(emu_check_args("%s", emu_instance<&%s>()%s), '
               'emu_launch(dim3(%s), dim3(%s), [=]() { %s(%s); }, %s, emu_kernel_key<&%s>()))'
               % (name.replace('"', "'"), name, (', ' + args) if args.strip() else '',
                  cfg[0], cfg[1], name, args, smem, name))
    i = p + 1
print(''.join(out))
