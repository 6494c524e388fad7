/* partition_int.h: private helpers shared by partition.c, calibrate.c and their CLI/tests. */
#ifndef PL_PARTITION_INT_H
#define PL_PARTITION_INT_H

#include "cost.h"

/* Ceiling of a / b for positive ints. */
static inline int cost_part_ceil_div(int a, int b) { return (a + b - 1) / b; }

#endif
