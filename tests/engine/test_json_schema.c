/* hone_json_schema_validate: verdicts on values against schemas (key order and spacing free,
 * the first failure named with its path), the keywords beyond the compiler's, refused
 * keywords as errors rather than verdicts, and agreement with the compiled grammar: whatever
 * the grammar accepts validates. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "harness.h"

/* 1 valid, 0 invalid, -1 the call failed; why gets the reason. */
static int check(const char *schema, const char *value, char *why, size_t cap)
{
    cJSON *s = schema ? cJSON_Parse(schema) : NULL, *v = cJSON_Parse(value);
    CHECK_MSG(v && (!schema || s), "test JSON does not parse: %s / %s", schema ? schema : "-", value);
    int valid = -1;
    int rc = hone_json_schema_validate(&valid, s, v, why, cap);
    cJSON_Delete(s);
    cJSON_Delete(v);
    return rc ? -1 : valid;
}

static const char *show(const char *s) { return s ? s : "(no schema)"; }

#define VALID(s, v) do { char w_[256]; CHECK_MSG(check(s, v, w_, sizeof w_) == 1, "%s should validate %s: %s", show(s), v, w_); } while (0)
#define INVALID(s, v, part) do { char w_[256]; CHECK_MSG(check(s, v, w_, sizeof w_) == 0 && strstr(w_, part), \
                                  "%s should refuse %s (with '%s'), why '%s'", show(s), v, part, w_); } while (0)

static const char weather[] =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":1},"
    "\"unit\":{\"enum\":[\"C\",\"F\"]},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}";

static void test_objects(void)
{
    VALID(weather, "{\"city\":\"Paris\"}");
    VALID(weather, "{ \"unit\" : \"C\",\n \"city\":\"Paris\", \"days\": 3 }"); /* any order, any spacing */
    VALID(weather, "{\"city\":\"Zürich\",\"days\":7.0}");                        /* 7.0 is an integer */
    INVALID(weather, "{\"unit\":\"C\"}", "#: the required property 'city' is missing");
    INVALID(weather, "{\"city\":3}", "#/city: 3 is not of type string");
    INVALID(weather, "{\"city\":\"\"}", "#/city: shorter than minLength");
    INVALID(weather, "{\"city\":\"Rome\",\"unit\":\"K\"}", "#/unit: is not one of the 'enum' values");
    INVALID(weather, "{\"city\":\"Rome\",\"days\":2.5}", "#/days: 2.5 is not of type integer");
    INVALID(weather, "{\"city\":\"Rome\",\"days\":8}", "#/days: 8 breaks 'maximum' 7");
    INVALID(weather, "{\"city\":\"Rome\",\"wind\":1}", "the property 'wind' is not allowed");
    INVALID(weather, "{\"city\":\"Rome\",\"city\":\"Oslo\"}", "appears twice");
    INVALID(weather, "[\"Paris\"]", "is not of type object");
    /* additionalProperties as a schema; no schema: any object */
    VALID("{\"additionalProperties\":{\"type\":\"number\"}}", "{\"a\":1,\"b\":2.5}");
    INVALID("{\"additionalProperties\":{\"type\":\"number\"}}", "{\"a\":1,\"b\":\"x\"}", "#/b:");
    VALID(NULL, "{\"anything\":[1,2]}");
    INVALID(NULL, "42", "is not of type object");
    VALID("{\"minProperties\":1,\"maxProperties\":2}", "{\"a\":1}");
    INVALID("{\"minProperties\":1}", "{}", "fewer properties");
    VALID("true", "null");
    INVALID("false", "1", "admits nothing");
}

static void test_arrays_strings_numbers(void)
{
    const char *tags = "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},\"minItems\":1,"
                       "\"maxItems\":3,\"uniqueItems\":true}";
    VALID(tags, "[\"a\",\"bcd\"]");
    INVALID(tags, "[]", "fewer items than minItems");
    INVALID(tags, "[\"a\",\"b\",\"c\",\"d\"]", "more items than maxItems");
    INVALID(tags, "[\"a\",\"abcd\"]", "#/1: longer than maxLength");
    INVALID(tags, "[\"a\",\"a\"]", "not unique");
    VALID("{\"maxLength\":2}", "\"éé\"");                       /* code points, not bytes */
    VALID("{\"pattern\":\"^[0-9]{4}-[0-9]{2}$\"}", "\"2026-12\"");
    INVALID("{\"pattern\":\"^[0-9]{4}$\"}", "\"12345\"", "does not match 'pattern'");
    VALID("{\"pattern\":\"b\"}", "\"abc\"");                   /* unanchored */
    VALID("{\"exclusiveMinimum\":0,\"multipleOf\":0.5}", "1.5");
    INVALID("{\"exclusiveMinimum\":0}", "0", "breaks 'exclusiveMinimum'");
    INVALID("{\"multipleOf\":0.5}", "1.2", "breaks 'multipleOf'");
    VALID("{\"type\":[\"string\",\"null\"]}", "null");
    INVALID("{\"type\":[\"string\",\"null\"]}", "1", "is not of type");
    VALID("{\"type\":\"number\"}", "1e300");                    /* integral, and far beyond long long */
    VALID("{\"type\":\"integer\"}", "1e300");
    VALID("{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,2]}");
    INVALID("{\"const\":{\"a\":[1,2]}}", "{\"a\":[2,1]}", "'const'");
    VALID("{\"type\":\"string\",\"format\":\"date-time\"}", "\"not a date\""); /* format annotates */
}

static void test_combinators_refs(void)
{
    const char *u = "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
    VALID(u, "\"x\"");
    VALID(u, "3");
    INVALID(u, "2.5", "matches no branch of 'anyOf'");
    const char *o = "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}";
    VALID(o, "2.5");
    INVALID(o, "2", "more than one branch of 'oneOf'");
    const char *a = "{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":3}]}";
    VALID(a, "4");
    INVALID(a, "2", "#/allOf/1: 2 breaks 'minimum' 3");
    const char *tree = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},"
                       "\"$ref\":\"#/$defs/node\"}";
    VALID(tree, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}");
    INVALID(tree, "{\"v\":1,\"kids\":[{\"v\":2},{\"kids\":[]}]}", "#/kids/1: the required property 'v'");
    /* $ref beside other keywords: both apply */
    VALID("{\"definitions\":{\"s\":{\"type\":\"string\"}},\"$ref\":\"#/definitions/s\",\"maxLength\":2}", "\"ab\"");
    INVALID("{\"definitions\":{\"s\":{\"type\":\"string\"}},\"$ref\":\"#/definitions/s\",\"maxLength\":2}", "\"abc\"",
            "longer than maxLength");
}

static void test_refused(void)
{
    char why[128];
    CHECK(check("{\"if\":{\"type\":\"string\"}}", "1", why, sizeof why) == -1);
    CHECK_MSG(strstr(hone_error_last(), "'if'"), "error: %s", hone_error_last());
    CHECK(check("{\"$ref\":\"http://example.com/s.json\"}", "1", why, sizeof why) == -1);
    CHECK(check("{\"pattern\":\"(\"}", "\"x\"", why, sizeof why) == -1);
    CHECK(check("{\"items\":[{\"type\":\"string\"}]}", "[\"x\"]", why, sizeof why) == -1);
    CHECK(check("{\"type\":\"text\"}", "1", why, sizeof why) == -1);
    CHECK(check("{\"$ref\":\"#\"}", "1", why, sizeof why) == -1); /* endless recursion is refused, not a crash */
}

/* Whatever the compiled grammar accepts, the validator accepts (the converse does not hold:
 * the grammar fixes key order and spacing). */
static void test_grammar_agrees(void)
{
    static const char *const values[] = {"{\"city\":\"Oslo\"}", "{\"city\": \"Oslo\", \"unit\": \"F\"}",
                                         "{\"city\":\"Oslo\",\"unit\":\"F\",\"days\":2}", "{\"unit\":\"F\"}",
                                         "{\"city\":1}", "{\"days\":2,\"city\":\"Oslo\"}"};
    /* weather without the bounds on days, which only the validator reads */
    static const char compilable[] =
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":1},"
        "\"unit\":{\"enum\":[\"C\",\"F\"]},\"days\":{\"type\":\"integer\"}},"
        "\"required\":[\"city\"],\"additionalProperties\":false}";
    cJSON *s = cJSON_Parse(compilable);
    hone_grammar *g = NULL;
    CHECK(s && hone_json_schema_compile(&g, s, NULL) == 0);
    int accepted = 0;
    for (size_t i = 0; g && i < sizeof values / sizeof values[0]; i++) {
        if (!hone_grammar_accepts(g, values[i], strlen(values[i]))) continue;
        accepted++;
        char why[128];
        CHECK_MSG(check(compilable, values[i], why, sizeof why) == 1, "grammar accepts %s, validator says %s", values[i], why);
    }
    CHECK(accepted == 3); /* the first three; key order and wrong types are the grammar's refusals */
    hone_grammar_free(g);
    cJSON_Delete(s);
}

/* hone_json_schema_relax: the validator's own keywords go from every subschema, property names
 * that look like keywords stay, and the compiler then takes the schema. */
static void test_relax(void)
{
    cJSON *s = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"minimum\":{\"type\":\"number\",\"maximum\":3},"
                           "\"tags\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"pattern\":\"^a\"}},"
                           "\"alt\":{\"anyOf\":[{\"multipleOf\":2},{\"$ref\":\"#/$defs/d\"}]}},"
                           "\"$defs\":{\"d\":{\"type\":\"string\",\"format\":\"date\",\"minLength\":1}},\"minProperties\":1}");
    CHECK(s != NULL);
    hone_grammar *g = NULL;
    CHECK(hone_json_schema_compile(&g, s, NULL) == HONE_EUNSUPPORTED);
    hone_json_schema_relax(s);
    char *txt = cJSON_PrintUnformatted(s);
    CHECK_MSG(txt && !strcmp(txt, "{\"type\":\"object\",\"properties\":{\"minimum\":{\"type\":\"number\"},"
                                  "\"tags\":{\"type\":\"array\",\"items\":{}},\"alt\":{\"anyOf\":[{},{\"$ref\":\"#/$defs/d\"}]}},"
                                  "\"$defs\":{\"d\":{\"type\":\"string\",\"minLength\":1}}}"),
              "relaxed: %s", txt ? txt : "(null)");
    free(txt);
    CHECK_MSG(hone_json_schema_compile(&g, s, NULL) == 0,
              "relaxed schema compiles: %s", hone_error_last());
    hone_grammar_free(g);
    hone_json_schema_relax(NULL);
    cJSON_Delete(s);
}

TEST_MAIN(TEST_CASE(test_relax), TEST_CASE(test_objects), TEST_CASE(test_arrays_strings_numbers), TEST_CASE(test_combinators_refs),
          TEST_CASE(test_refused), TEST_CASE(test_grammar_agrees))
