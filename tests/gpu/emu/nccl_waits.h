/* The emulated NCCL's board of waits (nccl_waits.c): what each rank's
 * collective is waiting for, in memory every rank of the node can read, so
 * that a rank stuck in agree (nccl_mpi.c) can tell a cycle of waits, a
 * deadlock, from a peer that is merely late. */
#ifndef ST_EMU_NCCL_WAITS_H
#define ST_EMU_NCCL_WAITS_H

#include <stddef.h>

/* Collective over MPI_COMM_WORLD: call it on every rank, once, before the
 * first communicator.  When the ranks do not share one node the board
 * stays off and every other call does nothing. */
void emu_waits_init(void);

/* This rank is a member of the communicator with the world-wide name
 * COLOUR, its INDEX-th (the index agree's lines use). */
void emu_waits_comm(int colour, int index);

/* This rank has issued its SEQ-th collective on COLOUR and waits for the
 * communicator's other ranks to issue theirs; emu_waits_end when they have. */
void emu_waits_begin(int colour, long seq);
void emu_waits_end(void);

/* 1, with the cycle described in LINE, when this rank's wait is part of a
 * cycle of waits that has stood since the previous call; else 0. */
int emu_waits_cycle(char *line, size_t n);

#endif
