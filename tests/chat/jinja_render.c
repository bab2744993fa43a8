/* Test helper for tests/chat/test_templates.py: renders a list of cases with engine/jinja and
 * prints the results as JSON, so that the Python test can compare them with jinja2's.
 * Usage: jinja_render CASES.json, where CASES.json is
 *   [{"template": "TEXT", "vars": {...}, "now": SECONDS}, ...]
 * and the output is [{"ok": true, "out": "..."} | {"ok": false, "error": "...", "raised": "..."|null}]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/error.h"
#include "engine/file.h"
#include "engine/jinja.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: jinja_render CASES.json\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (hone_file_read(argv[1], &text, &len)) {
        fprintf(stderr, "jinja_render: %s\n", hone_error_last());
        return 1;
    }
    cJSON *cases = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsArray(cases)) {
        fprintf(stderr, "jinja_render: %s is not a JSON array\n", argv[1]);
        return 1;
    }
    cJSON *results = cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *tj = cJSON_GetObjectItemCaseSensitive(c, "template");
        const cJSON *vars = cJSON_GetObjectItemCaseSensitive(c, "vars");
        const cJSON *now = cJSON_GetObjectItemCaseSensitive(c, "now");
        cJSON *r = cJSON_CreateObject();
        hone_jinja *t = NULL;
        char *out = NULL;
        int rc = cJSON_IsString(tj) ? hone_jinja_new(&t, tj->valuestring, strlen(tj->valuestring))
                                    : hone_error_set(HONE_EINVAL, "case without a template");
        if (!rc) {
            hone_jinja_opts o = HONE_JINJA_OPTS_INIT;
            if (cJSON_IsNumber(now)) o.now = (int64_t)now->valuedouble;
            rc = hone_jinja_render(&out, t, vars, &o);
        }
        cJSON_AddBoolToObject(r, "ok", rc == 0);
        if (rc == 0) {
            cJSON_AddStringToObject(r, "out", out);
        } else {
            cJSON_AddStringToObject(r, "error", hone_error_last());
            if (hone_jinja_raised()) cJSON_AddStringToObject(r, "raised", hone_jinja_raised());
            else cJSON_AddNullToObject(r, "raised");
        }
        cJSON_AddItemToArray(results, r);
        free(out);
        hone_jinja_free(t);
    }
    char *s = cJSON_PrintUnformatted(results);
    fputs(s, stdout);
    fputc('\n', stdout);
    free(s);
    cJSON_Delete(results);
    cJSON_Delete(cases);
    return 0;
}
