/* JSON Schema -> grammar (engine/grammar.h) for structured output: every sentence of the
 * grammar is JSON text that validates against the schema.
 *
 * Supported: type (object, array, string, number, integer, boolean, null, or a list of
 * them), properties (emitted in the declared order; required ones always, optional ones
 * may be skipped), required, additionalProperties (false, true or a schema; with declared
 * properties only those are emitted, which every value of it allows), enum, const, items,
 * minItems, maxItems, anyOf, oneOf (only when its branches' types are disjoint, so that at
 * most one can match), allOf of one schema, $ref to #, #/$defs/... and #/definitions/...,
 * minLength, maxLength; annotations (title, description, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly) are ignored. Any other keyword is refused
 * (HONE_EUNSUPPORTED, the message naming it and where it is).
 *
 * Bounded so that a generation cannot run away: whitespace between tokens is "", " " or
 * a newline and up to 20 blanks (none after the value), integer parts at most 16 digits, fractions 16, exponents 3. */
#ifndef HONE_JSON_SCHEMA_H
#define HONE_JSON_SCHEMA_H

#include "grammar.h"

struct cJSON;

typedef struct {
    const char *prefix;  /* literal text before the value (NULL: none), e.g. "<tool_call>\n" */
    const char *suffix;  /* literal text after it (NULL: none) */
} hone_json_schema_opts;

#define HONE_JSON_SCHEMA_OPTS_INIT {.prefix = NULL, .suffix = NULL}

/* Compiles schema (NULL: any JSON object, what response_format json_object asks for) into a
 * finished grammar; the caller frees *out. */
int hone_json_schema_compile(hone_grammar **out, const struct cJSON *schema,
                             const hone_json_schema_opts *opts);

#endif
