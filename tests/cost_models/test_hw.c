/* test_hw.c: hardware descriptions: every preset loads, overrides, unknown keys and sections,
 * malformed INI lines with their line numbers, writing and reading back, the preset directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"

/* Returns 1 when msg contains want (and says so when not). */
static int has(const char *msg, const char *want) {
    int ok = strstr(msg, want) != NULL;
    if (!ok) fprintf(stderr, "\n  message '%s' lacks '%s'\n", msg, want);
    return ok;
}

/* Every embedded preset loads and checks; the required ones exist. */
static void test_presets(void) {
    const char *want[] = {"cluster-a", "cluster-b", "dgx-a100", "h100", "h200", "tpu-v3", "cpu", NULL};
    for (const char **w = want; *w; w++) CU_ASSERT_PTR_NOT_NULL(cost_hw_preset_text(*w));
    int n = 0;
    for (const char *const *p = cost_hw_preset_names(); *p; p++, n++) {
        cost_hw hw;
        pl_err e = {0};
        int rc = cost_hw_load(&hw, *p, &e);
        if (rc != PL_OK) fprintf(stderr, "\n  %s: %s\n", *p, e.msg);
        CU_ASSERT_EQUAL(rc, PL_OK);
        CU_ASSERT_STRING_EQUAL(hw.name, *p);
        CU_ASSERT(hw.source[0] != 0);
        CU_ASSERT(hw.memory_bytes > 0);
    }
    CU_ASSERT(n >= 7);
    cost_hw hw;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "cluster-a", &e), PL_OK);
    CU_ASSERT_EQUAL(hw.devices_per_node, 4);
    CU_ASSERT_DOUBLE_EQUAL(hw.inter_bandwidth_Bps, 1.25e9, 0); /* 10 Gbps */
    CU_ASSERT_DOUBLE_EQUAL(hw.memory_bytes, 16e9, 0);
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "dgx-a100", &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(hw.memory_bytes, 80e9, 0);
    CU_ASSERT_DOUBLE_EQUAL(hw.peak_flops[COST_BF16], 312e12, 0);
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "nosuch", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "unknown hardware 'nosuch'"));
    CU_ASSERT(has(e.msg, "h100"));
}

/* --set style overrides change one key; unknown keys and bad values fail. */
static void test_overrides(void) {
    cost_hw hw;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "cluster-b", &e), PL_OK);
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "link.inter.bandwidth", "12.5e9", &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(hw.inter_bandwidth_Bps, 12.5e9, 0);
    CU_ASSERT_EQUAL(cost_hw_set_kv(&hw, "device.flops_fp32=1e12", &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(hw.peak_flops[COST_FP32], 1e12, 0);
    CU_ASSERT_EQUAL(cost_hw_set_kv(&hw, "topology.nodes=3", &e), PL_OK);
    CU_ASSERT_EQUAL(hw.nodes, 3);
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "link.inter.bandwith", "1", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "unknown hardware key 'link.inter.bandwith'"));
    CU_ASSERT(has(e.msg, "link.inter.bandwidth"));
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "bandwidth", "1", &e), PL_EINPUT);
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "device.efficiency", "fast", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "device.efficiency must be a number"));
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "link.intra.latency", "-1", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "must be >= 0"));
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "topology.devices_per_node", "0", &e), PL_EINPUT);
    CU_ASSERT_EQUAL(cost_hw_set_kv(&hw, "device.efficiency", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "KEY=VALUE"));
    CU_ASSERT_EQUAL(cost_hw_set(&hw, "device.efficiency", "1.5", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "device.efficiency must be in (0, 1] (fraction of peak), got '1.5'"));
    CU_ASSERT_EQUAL(cost_hw_set_kv(&hw, "link.intra.bandwidth=0", &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "--set link.intra.bandwidth=0: link.intra.bandwidth must be > 0"));
    /* the check applies the same ranges to values set in the structure itself */
    hw.efficiency = 1.5;
    CU_ASSERT_EQUAL(cost_hw_check(&hw, &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "cluster-b: device.efficiency must be in (0, 1] (fraction of peak), got 1.5"));
    hw.efficiency = 0.5;
    hw.gemm_units = 0;
    CU_ASSERT_EQUAL(cost_hw_check(&hw, &e), PL_EINPUT);
    CU_ASSERT(has(e.msg, "gemm.units must be an integer in [1, "));
}

/* One bad INI text: PL_EINPUT and "hw.ini:LINE: ..." containing want. */
static void ini_bad(const char *text, int line, const char *want) {
    cost_hw hw;
    cost_hw_init(&hw);
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_parse(&hw, "hw.ini", text, &e), PL_EINPUT);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "hw.ini:%d: ", line);
    CU_ASSERT(has(e.msg, prefix));
    CU_ASSERT(has(e.msg, want));
}

/* Unknown sections and keys, malformed lines, repeats and bad values fail with their line. */
static void test_ini_bad(void) {
    ini_bad("[device]\nflops_fp32 = 1e12\nflops_fp8 = 2e12\n", 3, "unknown key 'flops_fp8' in [device]");
    ini_bad("; c\n[gpu]\nflops = 1\n", 2, "unknown section [gpu]");
    ini_bad("[device]\nflops_fp32 1e12\n", 2, "malformed line");
    ini_bad("[device\nflops_fp32 = 1\n", 1, "malformed section header");
    ini_bad("flops_fp32 = 1\n", 1, "key outside any section");
    ini_bad("[device]\nflops_fp32 = -5\n", 2, "must be >= 0");
    ini_bad("[device]\nflops_fp32 = lots\n", 2, "must be a number");
    ini_bad("[topology]\nnodes = 2.5\n", 2, "must be an integer");
    ini_bad("[link.inter]\nlatency = 1e-6\nlatency = 2e-6\n", 3, "repeats");
    ini_bad("[link.intra]\nbandwidth = 1e9\n  latency = 2\n", 3, "indented line");
    /* the hardware is left untouched on error */
    cost_hw hw;
    cost_hw_init(&hw);
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_parse(&hw, "x.ini", "[device]\nflops_fp32 = 5\nbogus = 1\n", &e), PL_EINPUT);
    CU_ASSERT_DOUBLE_EQUAL(hw.peak_flops[COST_FP32], 0, 0);
}

/* Every number key's range is refused where it is read, with the key's line: the same range for a
 * negative value and for 0 where 0 is not allowed; the unknown-section message lists every section
 * the reader takes ([gemm] and [collective] too). */
static void test_ini_ranges(void) {
    ini_bad("[hardware]\nname = x\n[device]\nefficiency = 2\n", 4,
            "device.efficiency must be in (0, 1] (fraction of peak), got '2'");
    ini_bad("[device]\nefficiency = 0\n", 2, "device.efficiency must be in (0, 1]");
    ini_bad("[device]\nmemory_efficiency = 1.01\n", 2, "device.memory_efficiency must be in (0, 1]");
    ini_bad("[link.intra]\nlatency = 1e-6\nbandwidth = 0\n", 3, "link.intra.bandwidth must be > 0 (bytes/s), got '0'");
    ini_bad("[link.intra]\nbandwidth = -1\n", 2, "link.intra.bandwidth must be > 0 (bytes/s), got '-1'");
    ini_bad("[link.inter]\nbandwidth = 0\n", 2, "link.inter.bandwidth must be > 0");
    ini_bad("[gemm]\nunits = 4\nmax_efficiency = 5\n", 3, "gemm.max_efficiency must be in [0, 1] (fraction of peak), got '5'");
    ini_bad("[gemm]\nattention_bandwidth = -0.5\n", 2, "gemm.attention_bandwidth must be in [0, 1]");
    ini_bad("[collective]\nintra_efficiency = 0\n", 2, "collective.intra_efficiency must be in (0, 1]");
    ini_bad("[topology]\nnodes = 0\n", 2, "topology.nodes must be an integer in [1, ");
    ini_bad("[gpu]\n", 1, "unknown section [gpu] (known: hardware, device, topology, link.intra, link.inter, gemm, "
            "collective)");
    /* 0 stays allowed where it means "unknown" or "not set" */
    cost_hw hw;
    cost_hw_init(&hw);
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_parse(&hw, "ok.ini", "[device]\nflops_tf32 = 0\nlaunch_overhead = 0\n[gemm]\n"
                                  "max_efficiency = 0\n[link.intra]\nlatency = 0\n", &e), PL_OK);
    CU_ASSERT_EQUAL(cost_hw_check(&hw, &e), PL_OK);
}

/* Writes text[0..len) to dir/name and loads it with cost_hw_load: PL_EINPUT and a message that
 * starts with "dir/name" + where and contains want. */
static void load_bad(const char *dir, const char *name, const char *text, size_t len, const char *where,
                     const char *want) {
    char *path = pl_test_path(dir, name);
    pl_err e = {0};
    CU_ASSERT_EQUAL(pl_write_file(path, text, len, &e), PL_OK);
    cost_hw hw;
    CU_ASSERT_EQUAL(cost_hw_load(&hw, path, &e), PL_EINPUT);
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s%s", path, where);
    CU_ASSERT(strncmp(e.msg, prefix, strlen(prefix)) == 0);
    if (strncmp(e.msg, prefix, strlen(prefix)) != 0) fprintf(stderr, "\n  message '%s' lacks '%s'\n", e.msg, prefix);
    CU_ASSERT(has(e.msg, want));
    remove(path);
    free(path);
}

/* A hardware file's range errors name the file and the key's line (not the name it gives, which
 * may be a preset's); a NUL byte is refused with its line; a file without a [device] section
 * (an empty one included) describes nothing and is refused. */
static void test_ini_files(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL(dir);
    if (!dir) return;
    const char *h100 = cost_hw_preset_text("h100");
    CU_ASSERT_PTR_NOT_NULL(h100);
    if (!h100) return;
    /* the preset with efficiency = 2, as sed would make it: the error points at its line */
    const char *at = strstr(h100, "\nefficiency = ");
    CU_ASSERT_PTR_NOT_NULL(at);
    if (at) {
        int line = 2;
        for (const char *p = h100; p < at; p++) line += *p == '\n';
        pl_buf b;
        pl_buf_init(&b);
        pl_buf_printf(&b, "%.*sefficiency = 2%s", (int)(at + 1 - h100), h100, strchr(at + 1, '\n'));
        char where[32];
        snprintf(where, sizeof where, ":%d: ", line);
        load_bad(dir, "eff2.ini", b.data, b.len, where, "device.efficiency must be in (0, 1] (fraction of peak), got '2'");
        pl_buf_free(&b);
    }
    static const char nul[] = "[hardware]\nname = x\n[dev\0ice]\nflops_fp32 = 1\n";
    load_bad(dir, "nul.ini", nul, sizeof nul - 1, ":3: ", "not a text file (a NUL byte at offset 24)");
    load_bad(dir, "empty.ini", "", 0, ": ", "no [device] section (no section at all)");
    load_bad(dir, "blank.ini", "; nothing\n\n", 11, ": ", "no [device] section");
    load_bad(dir, "named.ini", "[hardware]\nname = x\n", 20, ": ", "no [device] section: a hardware file must describe");
    /* a fragment parsed over a description is still fine without one */
    cost_hw hw;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "h100", &e), PL_OK);
    CU_ASSERT_EQUAL(cost_hw_parse(&hw, "frag.ini", "[link.inter]\nlatency = 1e-5\n", &e), PL_OK);
    CU_ASSERT_EQUAL(cost_hw_parse(&hw, "frag.ini", "", &e), PL_OK);
    remove(dir);
    free(dir);
}

/* Writing a description and parsing it back gives the same values. */
static void test_write_roundtrip(void) {
    cost_hw hw, back;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "h200", &e), PL_OK);
    hw.efficiency = 0.123456789012345;
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(cost_hw_write(&hw, &b), PL_OK);
    cost_hw_init(&back);
    CU_ASSERT_EQUAL(cost_hw_parse(&back, "w.ini", b.data, &e), PL_OK);
    CU_ASSERT(memcmp(&hw, &back, sizeof hw) == 0);
    pl_buf_free(&b);
}

/* The JSON form holds every key once, numbers exact and strings escaped. */
static void test_json(void) {
    cost_hw hw;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "dgx-a100", &e), PL_OK);
    hw.efficiency = 0.123456789012345;
    snprintf(hw.description, sizeof hw.description, "a \"quoted\" name");
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(cost_hw_json(&hw, &b), PL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"device.efficiency\":0.123456789012345,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"hardware.description\":\"a \\\"quoted\\\" name\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"gemm.units\":108,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"topology.devices_per_node\":8,"));
    CU_ASSERT(b.data[0] == '{' && b.data[b.len - 1] == '}');
    pl_buf_free(&b);
}

/* PIPELAB_HARDWARE_DIR is searched before the embedded presets; paths load directly. */
static void test_hardware_dir(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL(dir);
    if (!dir) return;
    char *path = pl_test_path(dir, "h100.ini");
    const char *text = "[hardware]\nname = mine\n[device]\nflops_fp32 = 7\n";
    pl_err e = {0};
    CU_ASSERT_EQUAL(pl_write_file(path, text, strlen(text), &e), PL_OK);
    setenv("PIPELAB_HARDWARE_DIR", dir, 1);
    cost_hw hw;
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "h100", &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(hw.name, "mine");
    CU_ASSERT_DOUBLE_EQUAL(hw.peak_flops[COST_FP32], 7, 0);
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "h200", &e), PL_OK); /* falls back to the embedded one */
    CU_ASSERT_DOUBLE_EQUAL(hw.memory_bytes, 141e9, 0);
    unsetenv("PIPELAB_HARDWARE_DIR");
    CU_ASSERT_EQUAL(cost_hw_load(&hw, path, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(hw.name, "mine");
    CU_ASSERT_EQUAL(cost_hw_load(&hw, "h100", &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(hw.name, "h100");
    remove(path);
    remove(dir);
    free(path);
    free(dir);
}

/* Precision names round-trip. */
static void test_precision(void) {
    for (int p = 0; p < COST_NPREC; p++) CU_ASSERT_EQUAL(cost_precision_parse(cost_precision_name(p)), p);
    CU_ASSERT_EQUAL(cost_precision_parse("fp8"), -1);
}

void test_hw_register(void) {
    static const pl_test_case cases[] = {
        {"presets load", test_presets},
        {"overrides and unknown keys", test_overrides},
        {"bad INI lines", test_ini_bad},
        {"key ranges at their line, every section listed", test_ini_ranges},
        {"hardware files: file:line, NUL bytes, no [device]", test_ini_files},
        {"write and read back", test_write_roundtrip},
        {"every key as JSON", test_json},
        {"PIPELAB_HARDWARE_DIR and paths", test_hardware_dir},
        {"precision names", test_precision},
        {NULL, NULL},
    };
    pl_test_suite("cost hardware", cases);
}
