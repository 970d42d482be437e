/* The emulated device's block table (see shim_c.h): every block the
 * emulated runtime hands out, so copies, memsets, frees and kernel pointer
 * arguments can be checked against what a GPU could address.  One table
 * per process, searched from the newest block (most lookups are of recent
 * allocations).  Linked only into the emulated shardtrain
 * (build_shardtrain.sh); shim.h refers to it weakly. */
#include <stdio.h>
#include <stdlib.h>

struct emu_block { char *p; size_t n; };
static struct emu_block *blocks;
static size_t nblocks, capblocks;

void emu_dev_register(void *p, size_t n);
size_t emu_dev_unregister(void *p);
long emu_dev_find(const void *p, size_t n);
int emu_dev_contains(const void *p);

void emu_dev_register(void *p, size_t n)
{
    if (nblocks == capblocks) {
        capblocks = capblocks ? 2 * capblocks : 256;
        blocks = realloc(blocks, capblocks * sizeof *blocks);
        if (!blocks) {
            fprintf(stderr, "cuda emulation: out of host memory for the block table\n");
            abort();
        }
    }
    blocks[nblocks++] = (struct emu_block){p, n};
}

/* The block's size, or 0 when p does not start a block. */
size_t emu_dev_unregister(void *p)
{
    for (size_t i = nblocks; i-- > 0;)
        if (blocks[i].p == (char *)p) {
            size_t n = blocks[i].n;
            blocks[i] = blocks[--nblocks];
            return n;
        }
    return 0;
}

/* Index of the block holding [p, p + n); -2 when p is in a block but the
 * range runs past its end; -1 when p is in none. */
long emu_dev_find(const void *p, size_t n)
{
    const char *c = p;
    for (size_t i = nblocks; i-- > 0;)
        if (c >= blocks[i].p && c < blocks[i].p + blocks[i].n)
            return c + n <= blocks[i].p + blocks[i].n ? (long)i : -2;
    return -1;
}

int emu_dev_contains(const void *p) { return emu_dev_find(p, 1) >= 0; }
