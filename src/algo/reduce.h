/* Reduction kernels and datatype helpers. Pure functions of memory: no I/O, no communicator. */
#ifndef CHORUS_REDUCE_H
#define CHORUS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "chorus/chorus.h"

/* Bytes per element; 0 for an unknown datatype. */
size_t dtype_size(chorus_datatype_t dt);
/* "float32", "bfloat16", ...; NULL for an unknown datatype. Parse returns -1 if unknown. */
const char *dtype_name(chorus_datatype_t dt);
int dtype_parse(const char *name, chorus_datatype_t *dt_p);
/* A command-line datatype choice: "all" (every datatype, in enum order) or one name. Fills out[] and *n_p;
 * -1 for an unknown name. */
int dtype_parse_choice(const char *text, chorus_datatype_t out[chorus_num_datatypes], int *n_p);
/* "sum", "prod", "max", "min", "avg"; NULL if unknown. */
const char *redop_name(chorus_redop_t op);
int redop_parse(const char *name, chorus_redop_t *op_p);

/* dst[i] = dst[i] OP src[i] for i < count. avg reduces as sum (reduce_finish divides once at the end).
 * float16 / bfloat16: each element is widened to float32, combined, and rounded back (round to nearest
 * even); callers that need a single rounding over many ranks reduce in float32 instead (see core). */
void reduce_apply(void *dst, const void *src, size_t count, chorus_datatype_t dt, chorus_redop_t op);
/* dst[i] = a[i] OP b[i]: the out-of-place form, so a first step need not copy. dst may be a or b itself;
 * no other overlap is allowed. */
void reduce_apply3(void *dst, const void *a, const void *b, size_t count, chorus_datatype_t dt, chorus_redop_t op);
/* Finish a fully reduced buffer: for avg divide by nranks (integers truncate toward zero); otherwise nothing. */
void reduce_finish(void *buf, size_t count, chorus_datatype_t dt, chorus_redop_t op, int nranks);
/* The kernels' instruction sets ("portable", "avx2", "avx512", "avx512_bf16", "avx512_fp16"): every one
 * gives the same bits. The best one this CPU runs is chosen at the first call. reduce_isa_list writes the
 * names of those this CPU runs, baseline first, into names[0..max) and returns how many there are.
 * reduce_set_isa switches to the named one (NULL: back to the best) and returns its name, or returns NULL
 * and changes nothing if there is no such set or this CPU cannot run it. For tests and comparisons. */
#define REDUCE_MAX_ISAS 8
int reduce_isa_list(const char **names, int max);
const char *reduce_set_isa(const char *name);

/* IEEE binary16 and bfloat16 <-> float32, round to nearest even, NaN preserved (quiet). */
float fp16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);
/* Bulk conversions for the float32 staging of half-precision reductions. */
void half_to_float_array(float *dst, const uint16_t *src, size_t count, chorus_datatype_t dt);
void float_to_half_array(uint16_t *dst, const float *src, size_t count, chorus_datatype_t dt);

#endif
