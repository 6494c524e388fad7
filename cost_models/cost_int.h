/* cost_int.h: internals shared by the cost_models sources (not part of the public API). */
#ifndef COST_INT_H
#define COST_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cost.h"

/* The embedded hardware presets (generated cost_presets.c), terminated by {NULL, NULL}. */
struct cost_preset {
    const char *name;
    const char *text;
};
extern const struct cost_preset cost_presets[];
/* Their names in the same order, terminated by NULL (generated with them). */
extern const char *const cost_preset_names[];

/* Bytes of an fp32 and of an fp16 element. A model's parameter elements (dtype_bytes) are fp32
 * unless it says otherwise. */
#define COST_FP32_BYTES 4
#define COST_FP16_BYTES 2
/* Largest byte count read from a double (just under 2^62): sums of a few still fit int64_t. */
#define COST_MAX_BYTES_D 4.6e18

/* Cursor over the lines of a text, from past its byte order mark (pl_bom_len): cost_next_line
 * sets *line and *len (no '\n', no trailing '\r') and returns 1, or 0 at the end. lineno counts
 * from 1. */
typedef struct cost_lines {
    const char *text;
    size_t len, pos;
    int lineno;
} cost_lines;
void cost_lines_init(cost_lines *c, const char *text, size_t len);
int cost_next_line(cost_lines *c, const char **line, size_t *len);

/* Returns a malloc'd NUL-terminated copy of s[0..n), or NULL. */
char *cost_strndup(const char *s, size_t n);
/* Returns 1 when s[0..n) is the whole of word (a key, a column or a section name). */
int cost_word_is(const char *s, size_t n, const char *word);
/* Trims ASCII blanks on both sides of s[0..*n): returns the new start, updates *n. */
const char *cost_trim(const char *s, size_t *n);
/* Returns the first control character (below 0x20, tab included, or 0x7f; NUL too) in s[0..n),
 * or -1: layer names must be plain text, so that every writer can write them back unchanged. */
int cost_control_char(const char *s, size_t n);

/* Allocates a model of n layers with every number unknown / zero and cut_bytes zeroed.
 * Returns NULL and fills e on bad n or allocation failure. */
cost_model *cost_model_alloc(int n, pl_err *e);
/* Sets m->layer[i].name to a copy of name[0..len); returns PL_OK or PL_ENOMEM. */
int cost_layer_set_name(cost_model *m, int i, const char *name, size_t len, pl_err *e);
/* Fills cut_bytes[1..n] of a chain from out_bytes (cut_bytes[0] is left alone). */
void cost_model_chain_cuts(cost_model *m);
/* Sets m->name from the stem of a path ("x/gnmt.graph.txt" -> "gnmt"). */
void cost_model_name_from_path(cost_model *m, const char *path);
/* Parses a whole non-negative number (double) from s[0..n); returns 0 or -1. */
int cost_parse_nonneg(const char *s, size_t n, double *out);
/* Converts a non-negative double of bytes to int64_t; returns 0, or -1 when too large. */
int cost_bytes_from_double(double v, int64_t *out);

#endif
