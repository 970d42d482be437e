"""Which lines of cuda/ the host emulation has run: gcov's counts, gathered
from every instrumented build under DIR (EMU_COVERAGE, tests/gpu/emu/emu.sh)
and summed per line of each kernel file.

Usage: coverage.py DIR CUDA_DIR [--out REPORT]

Prints one line per file of CUDA_DIR that some build compiled (lines with
code, lines run at least once, the share) and a total; REPORT (default
stdout only) also gets, per file, every line with code that never ran, with
its text.  A line counts as run when any build ran it, any number of
times, in any process.

Why: no line of cuda/ has run on a GPU, so the emulation is the only
evidence that a kernel line does what it should, and a line it never
reached has no evidence at all.  What it cannot say: a line run once with
one shape has been checked for that shape only; and a line that the
compiler folded away before instrumenting (-O2, as the tests build) has no
count, so it appears in neither column.  Files of CUDA_DIR that no build
compiled (gemm_lt.cu: gemm_host.cpp stands in for cuBLASLt) are named as
such.  Exit status 1 when DIR holds no counts at all."""
import json
import os
import subprocess
import sys


def gcov_files(gcda):
    """gcov's JSON for one .gcda: a list of {file, lines}."""
    r = subprocess.run(['gcov', '--json-format', '--stdout', os.path.basename(gcda)],
                       cwd=os.path.dirname(gcda), capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        print('coverage.py: gcov failed on %s: %s' % (gcda, r.stderr.strip()[:200]),
              file=sys.stderr)
        return []
    files = []
    for doc in r.stdout.splitlines():
        doc = doc.strip()
        if doc:
            files += json.loads(doc).get('files', [])
    return files


def main(argv):
    args = [a for a in argv if not a.startswith('--out')]
    out = None
    for i, a in enumerate(argv):
        if a == '--out' and i + 1 < len(argv):
            out = argv[i + 1]
            args.remove(out)
    if len(args) != 2:
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    top, cuda = args[0], os.path.realpath(args[1])
    counts = {}  # path -> {line: count}
    n_gcda = 0
    for root, _, names in os.walk(top):
        for name in names:
            if not name.endswith('.gcda'):
                continue
            n_gcda += 1
            for f in gcov_files(os.path.join(root, name)):
                path = os.path.realpath(f['file'])
                if os.path.dirname(path) != cuda:
                    continue
                lines = counts.setdefault(path, {})
                for ln in f['lines']:
                    k = ln['line_number']
                    lines[k] = lines.get(k, 0) + ln['count']
    if not n_gcda:
        print('coverage.py: no gcov counts under %s' % top, file=sys.stderr)
        return 1
    summary, detail = [], []
    total_code = total_run = 0
    for path in sorted(counts):
        lines = counts[path]
        run = sum(1 for c in lines.values() if c > 0)
        total_code += len(lines)
        total_run += run
        summary.append('%-20s %5d lines with code, %5d run (%5.1f%%)' %
                       (os.path.basename(path), len(lines), run, 100.0 * run / max(len(lines), 1)))
        text = open(path).read().split('\n')
        never = sorted(k for k, c in lines.items() if c == 0)
        if never:
            detail.append('\n%s: %d lines never run' % (os.path.basename(path), len(never)))
            for k in never:
                detail.append('  %5d  %s' % (k, text[k - 1].strip() if k <= len(text) else ''))
    for name in sorted(os.listdir(cuda)):
        path = os.path.join(cuda, name)
        if name.endswith('.cu') and path not in counts:
            summary.append('%-20s not compiled by any emulated build' % name)
    summary.append('%-20s %5d lines with code, %5d run (%5.1f%%), from %d count files' %
                   ('total', total_code, total_run, 100.0 * total_run / max(total_code, 1), n_gcda))
    print('\n'.join(summary))
    if out:
        with open(out, 'w') as f:
            f.write('\n'.join(summary + detail) + '\n')
    return 0


sys.exit(main(sys.argv[1:]))
