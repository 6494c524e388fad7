/* pl_test.h: helpers shared by the CUnit suites (runner, file paths, running the CLI). */
#ifndef PL_TEST_H
#define PL_TEST_H

#include <CUnit/CUnit.h>
#include <stddef.h>

/* Each test binary defines this: it adds its suites to the CUnit registry. */
void pl_test_register(void);

/* Returns 1 when path exists (file or directory). */
int pl_test_exists(const char *path);
/* Runs a shell command, captures stdout+stderr (malloc'd, NUL-terminated) and returns the exit
 * status (or -1 when it did not exit normally). */
int pl_test_run(const char *cmd, char **output);
/* Runs `pipelab args` (the binary of PIPELAB_BIN) and asserts that it exits with rc and that its
 * output (stdout and stderr) contains want; says what it got on stderr when not. */
void pl_test_cli_expect(const char *args, int rc, const char *want);
/* Returns a malloc'd path "dir/name". */
char *pl_test_path(const char *dir, const char *name);
/* Makes a fresh temporary directory /tmp/pipelab-test-XXXXXX and returns its malloc'd path. The
 * runner removes it, with what it holds, after the tests (unless PIPELAB_TEST_KEEP is set); a
 * test may remove it sooner with pl_test_rmdir. */
char *pl_test_tmpdir(void);
/* Removes the tree at dir, a directory pl_test_tmpdir made (anything else is left alone and
 * refused), read-only folders in it included. Returns 0 when it is gone (or was gone already),
 * -1 when not (and says why on stderr). */
int pl_test_rmdir(const char *dir);

/* Marks the running test as skipped (what it needs is absent) and says why on stderr; the caller
 * returns at once. The runner lists the skipped tests after CUnit's summary, and exits 77
 * (CTest's skip) when every test that ran was skipped. */
void pl_test_skip(const char *why);

/* Returns the malloc'd, unescaped JSON string value of key in the object of json that follows
 * the text `after` (NULL when absent): enough JSON for what pipelab stores in params_json
 * (cli_inputs_json's objects; a "text" value may hold '}'). */
char *pl_test_json_string(const char *json, const char *after, const char *key);
/* Returns the number after the first "key": in json (NAN when absent or json is NULL). */
double pl_test_json_number(const char *json, const char *key);

/* Registers one suite with NULL-terminated tests; aborts on registry failure. */
typedef struct pl_test_case { const char *name; void (*fn)(void); } pl_test_case;
void pl_test_suite(const char *name, const pl_test_case *cases);

#endif
