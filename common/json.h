/* JSON that hsr reads from files a user gives it (bench results, traces,
 * checkpoint manifests, safetensors headers): checks shared by its parsers. */
#ifndef HSR_JSON_H
#define HSR_JSON_H

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* Every number in doc is finite: else `st` naming `what` (the file) and the
 * first offending number's path ("results[3].out_of_place.time"). cJSON
 * reads 1e999 as infinity without complaint. */
hsr_status json_check_finite(const struct cJSON *doc, hsr_status st, const char *what);

#ifdef __cplusplus
}
#endif
#endif
