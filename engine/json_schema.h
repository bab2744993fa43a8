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

#include <stddef.h>

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

/* Validates value against schema (NULL: any JSON object) without a grammar: what `hone verify`
 * asks of a tool call's arguments, whatever their key order or spacing. *valid is 1 or 0; on
 * 0, why (cap bytes, may be NULL) names the first failure and where ("#/city: expected a
 * string"). The keywords are the compiler's (above) plus those that only validate: minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum (numbers), multipleOf, pattern (PCRE2, unanchored
 * as JSON Schema says), minProperties, maxProperties, uniqueItems; format is an annotation (as
 * 2020-12 has it by default); $ref may sit beside other keywords; allOf takes any number of
 * schemas and oneOf any branches. Another keyword, or a malformed schema, is an error
 * (HONE_EUNSUPPORTED / HONE_EINVAL naming it), not a verdict.
 * Example: schema {"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}
 * and value {"unit":"C","city":"Paris"} -> 0, *valid 1; {"city":3} -> 0, *valid 0,
 * why "#/city: 3 is not of type string". */
int hone_json_schema_validate(int *valid, const struct cJSON *schema, const struct cJSON *value, char *why,
                              size_t cap);

/* Removes, in place, the keywords only the validator reads (minimum, maximum, the exclusive
 * bounds, multipleOf, pattern, minProperties, maxProperties, uniqueItems, format) from schema and every
 * subschema in it (properties, items, additionalProperties, anyOf / oneOf / allOf, $defs /
 * definitions; a property that is *named* "minimum" stays), so that the compiler takes it:
 * its grammar then admits a superset of the schema's instances. For a tool that is not strict,
 * whose parameters OpenAI treats as guidance. Accepts NULL. */
void hone_json_schema_relax(struct cJSON *schema);

#endif
