/* A Jinja interpreter for chat templates: the subset of Jinja2 that real GGUF / Hugging Face
 * chat templates use, rendered as transformers' apply_chat_template renders them
 * (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; tojson as
 * HF redefines it: json.dumps(ensure_ascii=False); raise_exception and strftime_now globals).
 * Anything outside the subset is an error naming the construct and its line, never a guess.
 *
 * Supported: {{ }}, {% %}, {# #}, whitespace control (- and +), if/elif/else, for (tuple
 * targets, loop filter, else, loop.index/index0/revindex/revindex0/first/last/length/previtem/
 * nextitem), break/continue, set (names, tuples, namespace attributes, block set), macro and
 * call blocks with caller(), generation blocks (rendered as plain content); the operators of
 * Jinja expressions (+ - * / // % ** ~, comparisons incl. chains, in / not in, and/or/not,
 * ternary if-else), literals (strings, numbers, lists, tuples, dicts), subscripts and Python
 * slices; filters abs, capitalize, count, d/default, first, float, indent, int, items, join,
 * last, length, list, lower, map, reject, rejectattr, replace, reverse, safe, select,
 * selectattr, sort, string, sum, title, tojson (indent=), trim, unique, upper; tests boolean,
 * callable, defined, divisibleby, eq/equalto/==, even, false, float, ge/gt/le/lt/ne, in,
 * integer, iterable, lower, mapping, none, number, odd, sameas, sequence, string, true,
 * undefined, upper; globals namespace, range, dict, raise_exception, strftime_now; methods
 * str.startswith/endswith/split/rsplit/strip/lstrip/rstrip/upper/lower/title/capitalize/
 * replace/find/rfind/count/join/splitlines, dict.items/keys/values/get. Case mapping
 * (upper, lower, title, capitalize) is ASCII only.
 *
 * Hostile templates fail, they do not crash or hang: nesting depth, macro recursion, loop
 * iterations, output size and memory all have limits (hone_jinja_opts). */
#ifndef HONE_JINJA_H
#define HONE_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

typedef struct hone_jinja hone_jinja;

typedef struct {
    int version;
    size_t max_output;   /* bytes of rendered text (and of any one macro's output) */
    size_t max_memory;   /* bytes the render may allocate in all */
    int64_t max_steps;   /* statements run + loop iterations + calls */
    int max_depth;       /* macro / caller() recursion */
    int64_t now;         /* strftime_now's clock (seconds since the epoch, local time); 0: time() */
} hone_jinja_opts;

#define HONE_JINJA_OPTS_INIT                                                                  \
    {                                                                                         \
        .version = 1, .max_output = 16u << 20, .max_memory = 256u << 20, .max_steps = 20000000, \
        .max_depth = 64, .now = 0                                                             \
    }

/* Parses template src[0..len). Errors (HONE_EINVAL) name the construct and the line:
 * "template line 3: unsupported statement 'include'". Newlines are normalised and one
 * trailing newline dropped, as Jinja2 does. On success the caller must hone_jinja_free(*out). */
int hone_jinja_new(hone_jinja **out, const char *src, size_t len);

void hone_jinja_free(hone_jinja *t);

/* Renders t with the variables of the cJSON object vars (NULL: none; JSON null -> none,
 * numbers that are whole and below 2^53 in magnitude -> int, others -> float) into a
 * malloc'd NUL-terminated *out (caller frees). opts NULL means HONE_JINJA_OPTS_INIT.
 * A template's raise_exception(msg) returns HONE_EINVAL with the message
 * "template line N: raise_exception: msg"; hone_jinja_raised() then gives msg alone.
 * Example: "{{ 'a' ~ x|upper }}" with {"x": "b"} -> "aB". */
int hone_jinja_render(char **out, const hone_jinja *t, const cJSON *vars, const hone_jinja_opts *opts);

/* The message of the last raise_exception on this thread's last failed render, or NULL when
 * that failure was not a raise_exception. Borrowed; valid until the next render. */
const char *hone_jinja_raised(void);

#endif
