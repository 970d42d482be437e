#!/usr/bin/env python3
"""rss_bound.py MIB COMMAND...: run COMMAND and hold it to MIB of resident
memory, for tests that promise bounded memory.

A limit on address space (ulimit -v) would do this for a plain build, but
AddressSanitizer reserves terabytes of shadow address space at start and
cannot run under one, and `make check-sanitize` runs the same tests.  So the
resident set is what is bounded: it is sampled every 20 ms, the command is
killed when it passes the bound, and the peak (the kernel's VmHWM, which a
sample cannot miss) is checked at the end.  Exits with COMMAND's status, or
99 with one line on stderr when the bound was passed."""
import os
import signal
import subprocess
import sys
import time


def high_water_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    limit_kib = int(sys.argv[1]) * 1024
    child = subprocess.Popen(sys.argv[2:])
    peak = 0
    while child.poll() is None:
        peak = max(peak, high_water_kib(child.pid))
        if peak > limit_kib:
            child.send_signal(signal.SIGKILL)
            child.wait()
            break
        time.sleep(0.02)
    # The child's own peak, from the kernel's accounting of waited-for
    # children, catches growth between two samples.
    import resource
    peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    if peak > limit_kib:
        print(f"rss_bound: {sys.argv[2]} reached {peak // 1024} MiB of resident "
              f"memory, over the bound of {limit_kib // 1024} MiB", file=sys.stderr)
        sys.exit(99)
    rc = child.returncode
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
