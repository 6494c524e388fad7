/* cuda_names.c: names of the GEMM precisions, built with or without CUDA (the command line
 * parses --precision either way). */
#include "exec_cuda.h"

#include <string.h>

const char *exec_precision_name(exec_precision p) {
    switch (p) {
    case EXEC_PREC_FP32: return "fp32";
    case EXEC_PREC_TF32: return "tf32";
    case EXEC_PREC_BF16: return "bf16";
    }
    return NULL;
}

int exec_precision_parse(const char *name, exec_precision *p) {
    if (!name) return -1;
    if (!strcmp(name, "fp32")) *p = EXEC_PREC_FP32;
    else if (!strcmp(name, "tf32")) *p = EXEC_PREC_TF32;
    else if (!strcmp(name, "bf16")) *p = EXEC_PREC_BF16;
    else return -1;
    return 0;
}
