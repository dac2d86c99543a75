/*
 * Schedules: which peer and which block each rank handles at each step, computed without I/O so that
 * tests/unit/test_plans.c can check them symbolically for every rank count. The algorithm files run
 * these plans through the primitives.
 */
#ifndef CHORUS_PLAN_H
#define CHORUS_PLAN_H

static inline int plan_mod(int x, int n) { return ((x % n) + n) % n; }

/* Ring step `step`: rank sends block (rank + shift - step) to its right neighbour and receives block
 * (rank + shift - step - 1) from its left one. */
typedef struct plan_ring_step {
    int right, left, send_block, recv_block;
} plan_ring_step_t;

static inline plan_ring_step_t plan_ring(int rank, int n, int shift, int step)
{
    plan_ring_step_t s = {plan_mod(rank + 1, n), plan_mod(rank - 1, n), plan_mod(rank + shift - step, n),
                          plan_mod(rank + shift - step - 1, n)};
    return s;
}

/* A chain that starts at `head` and visits head + 1, head + 2, ... : the rank's predecessor and successor
 * (-1 at the ends). */
static inline void plan_chain(int rank, int n, int head, int *prev_p, int *next_p)
{
    int pos = plan_mod(rank - head, n);
    *prev_p = pos == 0 ? -1 : plan_mod(rank - 1, n);
    *next_p = pos == n - 1 ? -1 : plan_mod(rank + 1, n);
}

/* Pairwise exchange step `step` (1 <= step < n): send to rank + step, receive from rank - step. */
static inline void plan_pairwise(int rank, int n, int step, int *to_p, int *from_p)
{
    *to_p = plan_mod(rank + step, n);
    *from_p = plan_mod(rank - step, n);
}

/* Dissemination round with distance `dist` (1, 2, 4, ... < n): signal rank + dist, hear from rank - dist. */
static inline void plan_dissemination(int rank, int n, int dist, int *to_p, int *from_p)
{
    *to_p = plan_mod(rank + dist, n);
    *from_p = plan_mod(rank - dist, n);
}

#endif
