/* test_partition.h: what the partition suite's files share (test_partition.c registers the
 * suite and holds the helpers; test_partition_io.c, test_partition_hier.c and test_calibrate.c
 * hold tests). */
#ifndef PL_TEST_PARTITION_H
#define PL_TEST_PARTITION_H

#include <stdint.h>

#include "cost.h"

/* Seeds the deterministic generator of the random models (xorshift64*). */
void rng_seed(uint64_t s);
/* Returns a uniform integer in [lo, hi]. */
int rng_int(int lo, int hi);
/* Fills a random model: integer-valued numbers so that sums are exact. */
void random_layers(cost_part_layer *y, int L);
/* Returns a partition of n stages starting at first[0..n-1] and ending before first[n], with
 * reps[] replicas each (NULL: 1). */
cost_partition *mk_part(int n, const int *first, const int *reps);
/* Returns 1 when the pipelab binary knows the subcommand. */
int cli_has(const char *cmd);

/* The partition file, real profiles and the CLI (test_partition_io.c). */
void test_partition_file(void);
void test_vgg16_cluster(void);
void test_input_pseudo_layer(void);
void test_vgg16_cluster_a_preset(void);
void test_partition_cli(void);
/* PipeDream's hierarchy (test_partition_hier.c). */
void test_hierarchy_bruteforce(void);
void test_hierarchy_flat_agrees(void);
void test_hierarchy_alexnet_4x4(void);
void test_hierarchy_limits_and_cli(void);

#endif
