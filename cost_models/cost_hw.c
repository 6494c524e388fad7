/* cost_hw.c: hardware descriptions: INI parsing (libinih), key overrides, presets, writing. */
#include <ini.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cost_int.h"

/* Longest INI line accepted (libinih's default buffer is 200 bytes including "\r\n\0"). */
#define HW_MAX_LINE 196
/* Largest hardware file read. */
#define HW_MAX_FILE_BYTES ((size_t)1 << 20)
/* Largest value of an integer key (nodes, devices per node). */
#define HW_MAX_COUNT (1L << 20)
/* The bandwidth of a link nobody described: free (cost.h). */
#define HW_FREE_LINK_BPS COST_FREE_LINK_BPS

typedef enum { K_NUM, K_INT, K_STR } key_type;

/* The values a number key accepts: the one range both the INI reader (with the key's line) and
 * cost_hw_check apply. Integer keys take [1, HW_MAX_COUNT]. */
typedef enum {
    R_NONNEG, /* >= 0 (0 = unknown or none) */
    R_POS,    /* > 0 */
    R_FRAC,   /* in (0, 1] */
    R_FRAC0   /* in [0, 1] (0 = not set) */
} key_range;

/* One INI key: section, name, type, where it lives in cost_hw, its unit for messages, the values
 * it accepts. */
typedef struct hw_key {
    const char *section, *name;
    key_type type;
    size_t off, size;
    const char *unit;
    key_range range;
} hw_key;

#define NUM(sec, nm, field, unit, range) {sec, nm, K_NUM, offsetof(cost_hw, field), sizeof(double), unit, range}
#define INT(sec, nm, field, unit) {sec, nm, K_INT, offsetof(cost_hw, field), sizeof(int), unit, R_POS}
#define STR(sec, nm, field) {sec, nm, K_STR, offsetof(cost_hw, field), sizeof(((cost_hw *)0)->field), "text", R_NONNEG}

static const hw_key keys[] = {
    STR("hardware", "name", name),
    STR("hardware", "description", description),
    STR("hardware", "source", source),
    NUM("device", "flops_fp32", peak_flops[COST_FP32], "FLOP/s", R_NONNEG),
    NUM("device", "flops_tf32", peak_flops[COST_TF32], "FLOP/s", R_NONNEG),
    NUM("device", "flops_fp16", peak_flops[COST_FP16], "FLOP/s", R_NONNEG),
    NUM("device", "flops_bf16", peak_flops[COST_BF16], "FLOP/s", R_NONNEG),
    NUM("device", "efficiency", efficiency, "fraction of peak", R_FRAC),
    NUM("device", "memory_bytes", memory_bytes, "bytes", R_NONNEG),
    NUM("device", "memory_bandwidth", memory_bandwidth_Bps, "bytes/s", R_NONNEG),
    NUM("device", "memory_efficiency", memory_efficiency, "fraction of bandwidth", R_FRAC),
    NUM("device", "launch_overhead", launch_s, "s", R_NONNEG),
    INT("topology", "nodes", nodes, "count"),
    INT("topology", "devices_per_node", devices_per_node, "count"),
    NUM("link.intra", "bandwidth", intra_bandwidth_Bps, "bytes/s", R_POS),
    NUM("link.intra", "latency", intra_latency_s, "s", R_NONNEG),
    NUM("link.inter", "bandwidth", inter_bandwidth_Bps, "bytes/s", R_POS),
    NUM("link.inter", "latency", inter_latency_s, "s", R_NONNEG),
    NUM("gemm", "max_efficiency", gemm_max_efficiency, "fraction of peak", R_FRAC0),
    NUM("gemm", "attention_efficiency", gemm_attention_efficiency, "fraction of peak", R_FRAC0),
    NUM("gemm", "attention_bandwidth", gemm_attention_bandwidth, "fraction of bandwidth", R_FRAC0),
    INT("gemm", "units", gemm_units, "count"),
    INT("gemm", "tile_m", gemm_tile_m, "count"),
    INT("gemm", "tile_n", gemm_tile_n, "count"),
    NUM("collective", "intra_efficiency", coll_intra_efficiency, "fraction of bandwidth", R_FRAC),
    NUM("collective", "inter_efficiency", coll_inter_efficiency, "fraction of bandwidth", R_FRAC),
};
#define NKEYS ((int)(sizeof keys / sizeof *keys))

/* The sections a hardware file may have: what the reader accepts and what its messages list. */
static const char *const sections[] = {"hardware", "device", "topology", "link.intra", "link.inter", "gemm",
                                       "collective"};
#define NSECTIONS ((int)(sizeof sections / sizeof *sections))
/* The section a hardware file must have (what describes the device; an empty file has none). */
#define HW_REQUIRED_SECTION 1 /* sections[1], "device" */

static const char *const prec_names[COST_NPREC] = {"fp32", "tf32", "fp16", "bf16"};

/* Returns the name of a precision. */
const char *cost_precision_name(cost_precision p) {
    return (unsigned)p < COST_NPREC ? prec_names[p] : "?";
}

/* Returns the precision of a name ("fp16"; "half" and "float" are not accepted), or -1. */
int cost_precision_parse(const char *s) {
    for (int p = 0; p < COST_NPREC; p++)
        if (strcmp(s, prec_names[p]) == 0) return p;
    return -1;
}

/* Fills hw with the neutral defaults documented in cost.h. */
void cost_hw_init(cost_hw *hw) {
    memset(hw, 0, sizeof *hw);
    hw->efficiency = 1.0;
    hw->memory_efficiency = 1.0;
    hw->nodes = 1;
    hw->devices_per_node = 1;
    hw->intra_bandwidth_Bps = HW_FREE_LINK_BPS;
    hw->inter_bandwidth_Bps = HW_FREE_LINK_BPS;
    hw->gemm_units = hw->gemm_tile_m = hw->gemm_tile_n = 1;
    hw->coll_intra_efficiency = hw->coll_inter_efficiency = 1.0;
}

/* Returns the key of (section, name), or -1. */
static int key_find(const char *section, const char *name) {
    for (int k = 0; k < NKEYS; k++)
        if (strcmp(keys[k].section, section) == 0 && strcmp(keys[k].name, name) == 0) return k;
    return -1;
}

/* Returns the index of a section in sections[], or -1 when it is unknown. */
static int section_find(const char *s, size_t n) {
    for (int i = 0; i < NSECTIONS; i++)
        if (cost_word_is(s, n, sections[i])) return i;
    return -1;
}

/* Returns 1 when a number key's value v lies in its range r (NaN never does). */
static int range_holds(key_range r, double v) {
    switch (r) {
    case R_POS: return v > 0 && isfinite(v);
    case R_FRAC: return v > 0 && v <= 1;
    case R_FRAC0: return v >= 0 && v <= 1;
    default: return v >= 0 && isfinite(v);
    }
}

/* Returns what range r accepts, for messages: "must be %s". */
static const char *range_text(key_range r) {
    switch (r) {
    case R_POS: return "> 0";
    case R_FRAC: return "in (0, 1]";
    case R_FRAC0: return "in [0, 1]";
    default: return ">= 0";
    }
}

/* Lists the keys of a section (or every "section.key" when section is NULL) into b. */
static void list_keys(pl_buf *b, const char *section) {
    int first = 1;
    for (int k = 0; k < NKEYS; k++) {
        if (section && strcmp(keys[k].section, section) != 0) continue;
        if (section)
            pl_buf_printf(b, "%s%s", first ? "" : ", ", keys[k].name);
        else
            pl_buf_printf(b, "%s%s.%s", first ? "" : ", ", keys[k].section, keys[k].name);
        first = 0;
    }
}

/* Stores a value into hw for key k; returns PL_OK or PL_EINPUT saying what is wrong (no position). */
static int key_store(cost_hw *hw, int k, const char *value, pl_err *e) {
    const hw_key *key = &keys[k];
    char *dst = (char *)hw + key->off;
    if (key->type == K_STR) {
        size_t n = strlen(value);
        /* the field, and the "key = value" line the writer makes of it, must both fit */
        size_t maxn = key->size - 1, line_room = HW_MAX_LINE - strlen(key->name) - 3;
        if (line_room < maxn) maxn = line_room;
        if (n > maxn)
            return pl_errf(e, PL_EINPUT, "%s.%s is longer than %zu characters", key->section, key->name, maxn);
        /* what the INI writer writes must read back the same: no control characters, no comment
         * characters, no surrounding blanks (the INI reader strips them) */
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)value[i];
            if (c < 0x20 || c == 0x7f)
                return pl_errf(e, PL_EINPUT, "%s.%s contains the control character 0x%02x", key->section, key->name, c);
            if (c == ';' && (i == 0 || value[i - 1] == ' ' || value[i - 1] == '\t'))
                return pl_errf(e, PL_EINPUT, "%s.%s may not have ';' at its start or after a blank (it starts "
                               "a comment in INI files)", key->section, key->name);
        }
        if (n && (value[0] == ' ' || value[n - 1] == ' '))
            return pl_errf(e, PL_EINPUT, "%s.%s may not begin or end with a blank", key->section, key->name);
        memcpy(dst, value, n + 1);
        return PL_OK;
    }
    if (key->type == K_INT) {
        long v;
        if (pl_parse_long(value, 1, HW_MAX_COUNT, &v) != 0)
            return pl_errf(e, PL_EINPUT, "%s.%s must be an integer in [1, %ld], got '%s'", key->section,
                           key->name, HW_MAX_COUNT, value);
        *(int *)(void *)dst = (int)v;
        return PL_OK;
    }
    double v;
    if (pl_parse_double(value, &v) != 0)
        return pl_errf(e, PL_EINPUT, "%s.%s must be a number (%s), got '%s'", key->section, key->name,
                       key->unit, value);
    if (!range_holds(key->range, v))
        return pl_errf(e, PL_EINPUT, "%s.%s must be %s (%s), got '%s'", key->section, key->name,
                       range_text(key->range), key->unit, value);
    *(double *)(void *)dst = v;
    return PL_OK;
}

/* State of one INI parse. */
typedef struct parse_ctx {
    cost_hw *hw;
    pl_err err;      /* first error (message without position) */
    int failed;
    int seen[NKEYS]; /* keys set by this file (a repeat is an error) */
} parse_ctx;

/* libinih callback: stores one key; returns 1 to go on, 0 to flag an error on this line. */
static int on_key(void *user, const char *section, const char *name, const char *value) {
    parse_ctx *c = user;
    if (c->failed) return 0;
    int k = key_find(section, name);
    if (k < 0) {
        pl_buf b;
        pl_buf_init(&b);
        list_keys(&b, section);
        pl_errf(&c->err, PL_EINPUT, "unknown key '%s' in [%s] (known: %s)", name, section,
                b.data ? b.data : "");
        pl_buf_free(&b);
        c->failed = 1;
        return 0;
    }
    if (c->seen[k]) {
        pl_errf(&c->err, PL_EINPUT, "key '%s' in [%s] repeats", name, section);
        c->failed = 1;
        return 0;
    }
    c->seen[k] = 1;
    if (key_store(c->hw, k, value, &c->err) != PL_OK) {
        c->failed = 1;
        return 0;
    }
    return 1;
}

/* Checks what libinih does not: long lines, unknown or malformed section headers, keys before any
 * section. Sets bit i of *seen for each section sections[i] the text has. Returns PL_OK or
 * PL_EINPUT with "path:line: ...". */
static int prescan(const char *path, const char *text, unsigned *seen, pl_err *e) {
    cost_lines c;
    cost_lines_init(&c, text, strlen(text));
    const char *line;
    size_t n;
    int in_section = 0;
    *seen = 0;
    while (cost_next_line(&c, &line, &n)) {
        if (n > HW_MAX_LINE)
            return pl_errf(e, PL_EINPUT, "%s:%d: line longer than %d characters", path, c.lineno, HW_MAX_LINE);
        size_t tn = n;
        const char *t = cost_trim(line, &tn);
        if (tn == 0 || t[0] == '#' || t[0] == ';') continue;
        if (t[0] == '[') {
            const char *close = memchr(t, ']', tn);
            if (!close)
                return pl_errf(e, PL_EINPUT, "%s:%d: malformed section header (no ']')", path, c.lineno);
            size_t rest = tn - (size_t)(close - t) - 1;
            const char *r = cost_trim(close + 1, &rest);
            if (rest > 0 && r[0] != ';' && r[0] != '#')
                return pl_errf(e, PL_EINPUT, "%s:%d: text after the section header", path, c.lineno);
            size_t sl = (size_t)(close - t) - 1;
            const char *s = cost_trim(t + 1, &sl);
            int sec = section_find(s, sl);
            if (sec < 0) {
                pl_buf known;
                pl_buf_init(&known);
                for (int i = 0; i < NSECTIONS; i++) pl_buf_printf(&known, "%s%s", i ? ", " : "", sections[i]);
                int rc = pl_errf(e, PL_EINPUT, "%s:%d: unknown section [%.*s] (known: %s)", path, c.lineno, (int)sl, s,
                                 known.data ? known.data : "");
                pl_buf_free(&known);
                return rc;
            }
            *seen |= 1u << sec;
            in_section = 1;
            continue;
        }
        if (!in_section)
            return pl_errf(e, PL_EINPUT, "%s:%d: key outside any section", path, c.lineno);
        if (line[0] == ' ' || line[0] == '\t')
            return pl_errf(e, PL_EINPUT, "%s:%d: indented line (continuation lines are not allowed)",
                           path, c.lineno);
        if (!memchr(t, '=', tn))
            return pl_errf(e, PL_EINPUT, "%s:%d: malformed line (expected key = value)", path, c.lineno);
    }
    return PL_OK;
}

/* Parses INI text over hw (cost_hw_parse), setting bit i of *seen for each section sections[i]
 * the text has; returns PL_OK or PL_EINPUT ("path:line: ..."). */
static int parse_sections(cost_hw *hw, const char *path, const char *text, unsigned *seen, pl_err *e) {
    if (!path) path = "<hardware>";
    text += pl_bom_len(text, strlen(text));
    if (prescan(path, text, seen, e) != PL_OK) return PL_EINPUT;
    parse_ctx *c = calloc(1, sizeof *c);
    if (!c) return pl_errf(e, PL_ENOMEM, "out of memory");
    cost_hw tmp = *hw;
    c->hw = &tmp;
    int line = ini_parse_string(text, on_key, c);
    int rc = PL_OK;
    if (line != 0 || c->failed) {
        if (line < 0)
            rc = pl_errf(e, PL_ENOMEM, "%s: the INI parser failed (%d)", path, line);
        else if (c->failed)
            rc = pl_errf(e, PL_EINPUT, "%s:%d: %s", path, line, c->err.msg);
        else
            rc = pl_errf(e, PL_EINPUT, "%s:%d: malformed line", path, line);
    } else {
        *hw = tmp;
    }
    free(c);
    return rc;
}

/* Parses INI text over hw; returns PL_OK or PL_EINPUT ("path:line: ..."). */
int cost_hw_parse(cost_hw *hw, const char *path, const char *text, pl_err *e) {
    unsigned seen;
    return parse_sections(hw, path, text, &seen, e);
}

/* Splits "section.key" at its last dot and sets it; returns PL_OK or PL_EINPUT. */
int cost_hw_set(cost_hw *hw, const char *key, const char *value, pl_err *e) {
    const char *dot = strrchr(key, '.');
    int k = -1;
    char sec[32];
    if (dot && dot != key && (size_t)(dot - key) < sizeof sec) {
        memcpy(sec, key, (size_t)(dot - key));
        sec[dot - key] = 0;
        k = key_find(sec, dot + 1);
    }
    if (k < 0) {
        pl_buf b;
        pl_buf_init(&b);
        list_keys(&b, NULL);
        int rc = pl_errf(e, PL_EINPUT, "unknown hardware key '%s' (known: %s)", key, b.data ? b.data : "");
        pl_buf_free(&b);
        return rc;
    }
    return key_store(hw, k, value, e);
}

/* Splits "KEY=VALUE" and sets it; returns PL_OK or PL_EINPUT naming the --set flag. */
int cost_hw_set_kv(cost_hw *hw, const char *kv, pl_err *e) {
    const char *eq = strchr(kv, '=');
    char key[64];
    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key)
        return pl_errf(e, PL_EINPUT, "--set wants KEY=VALUE (e.g. link.inter.bandwidth=12.5e9), got '%s'", kv);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    int rc = cost_hw_set(hw, key, eq + 1, e);
    if (rc != PL_OK && e) pl_err_prefix(e, "--set %s: ", kv);
    return rc;
}

/* Returns PL_OK when hw is usable, else PL_EINPUT naming the first bad key. The ranges are the
 * key table's, which the INI reader and cost_hw_set already apply with the file's line: this
 * catches values set in the structure itself. */
int cost_hw_check(const cost_hw *hw, pl_err *e) {
    const char *who = hw->name[0] ? hw->name : "hardware";
    for (int k = 0; k < NKEYS; k++) {
        const hw_key *key = &keys[k];
        const void *src = (const char *)hw + key->off;
        if (key->type == K_INT) {
            int v = *(const int *)src;
            if (v < 1 || v > HW_MAX_COUNT)
                return pl_errf(e, PL_EINPUT, "%s: %s.%s must be an integer in [1, %ld], got %d", who, key->section,
                               key->name, HW_MAX_COUNT, v);
        } else if (key->type == K_NUM) {
            double v = *(const double *)src;
            if (!range_holds(key->range, v))
                return pl_errf(e, PL_EINPUT, "%s: %s.%s must be %s (%s), got %g", who, key->section, key->name,
                               range_text(key->range), key->unit, v);
        }
    }
    return PL_OK;
}

/* Writes hw as INI text, every key, numbers with 17 significant digits (parses back equal). */
int cost_hw_write(const cost_hw *hw, pl_buf *out) {
    const char *sec = "";
    pl_buf_printf(out, "; pipelab hardware description (see cost_models/cost.h for units)\n");
    for (int k = 0; k < NKEYS; k++) {
        const hw_key *key = &keys[k];
        const char *src = (const char *)hw + key->off;
        if (strcmp(sec, key->section) != 0) {
            pl_buf_printf(out, "%s[%s]\n", k ? "\n" : "", key->section);
            sec = key->section;
        }
        if (key->type == K_STR) {
            if (src[0]) pl_buf_printf(out, "%s = %s\n", key->name, src);
        } else if (key->type == K_INT) {
            pl_buf_printf(out, "%s = %d\n", key->name, *(const int *)(const void *)src);
        } else {
            pl_buf_printf(out, "%s = %.17g\n", key->name, *(const double *)(const void *)src);
        }
    }
    return out->failed ? PL_ENOMEM : PL_OK;
}

/* Writes every key of hw as one JSON object, {"section.name": value, ...}, in the INI file's order:
 * a stored run records the whole hardware it was priced on, from the same table that reads it. */
int cost_hw_json(const cost_hw *hw, pl_buf *out) {
    pl_buf_putc(out, '{');
    for (int k = 0; k < NKEYS; k++) {
        const hw_key *key = &keys[k];
        const char *src = (const char *)hw + key->off;
        pl_buf_printf(out, "%s\"%s.%s\":", k ? "," : "", key->section, key->name);
        if (key->type == K_STR)
            pl_buf_json_string(out, src);
        else if (key->type == K_INT)
            pl_buf_printf(out, "%d", *(const int *)(const void *)src);
        else
            pl_buf_printf(out, "%.17g", *(const double *)(const void *)src);
    }
    pl_buf_putc(out, '}');
    return out->failed ? PL_ENOMEM : PL_OK;
}

/* Returns the names of the embedded presets, NULL-terminated: the table generated beside them,
 * so it needs no building (and no buffer) at run time. */
const char *const *cost_hw_preset_names(void) { return cost_preset_names; }

/* Returns the INI text of an embedded preset, or NULL. */
const char *cost_hw_preset_text(const char *name) {
    for (const struct cost_preset *p = cost_presets; p->name; p++)
        if (strcmp(p->name, name) == 0) return p->text;
    return NULL;
}

/* Parses text (from path) after cost_hw_init, names it, and checks it: a hardware description
 * must have a [device] section (an empty file describes nothing). */
static int load_text(cost_hw *hw, const char *path, const char *text, const char *name, pl_err *e) {
    cost_hw_init(hw);
    unsigned seen;
    if (parse_sections(hw, path, text, &seen, e) != PL_OK) return e ? e->code : PL_EINPUT;
    if (!(seen & (1u << HW_REQUIRED_SECTION)))
        return pl_errf(e, PL_EINPUT, "%s: no [%s] section%s: a hardware file must describe its device there "
                       "(flops_fp32, memory_bytes, ...)", path, sections[HW_REQUIRED_SECTION],
                       seen ? "" : " (no section at all)");
    if (!hw->name[0]) snprintf(hw->name, sizeof hw->name, "%s", name);
    return cost_hw_check(hw, e);
}

/* Reads the INI file at path and loads it as load_text does (name: the name it gets when it
 * gives none); a NUL byte is refused with its line. Returns PL_OK or the error naming the file. */
static int load_file(cost_hw *hw, const char *path, const char *name, pl_err *e) {
    char *text = NULL;
    size_t len;
    if (pl_read_file(path, HW_MAX_FILE_BYTES, &text, &len, e) != PL_OK) return e ? e->code : PL_EIO;
    int rc = pl_text_check(path, text, len, e);
    if (rc == PL_OK) rc = load_text(hw, path, text, name, e);
    free(text);
    return rc;
}

/* Loads a preset (PIPELAB_HARDWARE_DIR first, then embedded) or an .ini path, then checks it. */
int cost_hw_load(cost_hw *hw, const char *name_or_path, pl_err *e) {
    size_t n = strlen(name_or_path);
    int is_path = strchr(name_or_path, '/') != NULL || (n >= 4 && strcmp(name_or_path + n - 4, ".ini") == 0);
    if (is_path) {
        const char *b = strrchr(name_or_path, '/');
        b = b ? b + 1 : name_or_path;
        char stem[64]; /* the file's name up to its first dot, as a name the files written carry */
        pl_clean_name(stem, sizeof stem, b, strcspn(b, "."));
        return load_file(hw, name_or_path, stem, e);
    }
    const char *dir = getenv(COST_HARDWARE_DIR_ENV);
    if (dir && dir[0] && n < 64) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.ini", dir, name_or_path);
        struct stat st;
        if (stat(path, &st) == 0) return load_file(hw, path, name_or_path, e);
    }
    const char *t = cost_hw_preset_text(name_or_path);
    if (!t) {
        pl_buf b;
        pl_buf_init(&b);
        for (const char *const *p = cost_hw_preset_names(); *p; p++)
            pl_buf_printf(&b, "%s%s", p == cost_hw_preset_names() ? "" : ", ", *p);
        int rc = pl_errf(e, PL_EINPUT, "unknown hardware '%s' (presets: %s; or give a path to an .ini file)",
                         name_or_path, b.data ? b.data : "");
        pl_buf_free(&b);
        return rc;
    }
    char path[128];
    snprintf(path, sizeof path, "cost_models/hardware/%s.ini (embedded)", name_or_path);
    return load_text(hw, path, t, name_or_path, e);
}
