/* engine/jinja unit tests: values of expressions, filters, tests, statements and whitespace
 * control (expected strings are Python jinja2's output for the same template, HF settings);
 * the errors for unsupported constructs and raise_exception; limits against hostile templates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/jinja.h"
#include "harness.h"

/* Renders tpl with the JSON object vars (NULL: none) into a static buffer; NULL on error. */
static const char *render_opts(const char *tpl, const char *vars, const hone_jinja_opts *o, int *rc_out)
{
    static char result[8192];
    hone_jinja *t = NULL;
    cJSON *v = vars ? cJSON_Parse(vars) : NULL;
    char *out = NULL;
    int rc = hone_jinja_new(&t, tpl, strlen(tpl));
    if (!rc) rc = hone_jinja_render(&out, t, v, o);
    if (rc_out) *rc_out = rc;
    if (out) snprintf(result, sizeof result, "%s", out);
    free(out);
    hone_jinja_free(t);
    cJSON_Delete(v);
    return rc ? NULL : result;
}

static const char *render(const char *tpl, const char *vars) { return render_opts(tpl, vars, NULL, NULL); }

#define CHECK_RENDER(tpl, vars, want)                                                           \
    do {                                                                                        \
        const char *got_ = render(tpl, vars);                                                   \
        CHECK_MSG(got_ && !strcmp(got_, want), "%s\n  got:  %s\n  want: %s\n  (%s)", tpl,      \
                  got_ ? got_ : "(error)", want, got_ ? "" : hone_error_last());               \
    } while (0)

#define CHECK_FAILS(tpl, vars, code, words)                                                     \
    do {                                                                                        \
        int rc_ = 0;                                                                            \
        const char *got_ = render_opts(tpl, vars, NULL, &rc_);                                  \
        CHECK_MSG(!got_ && rc_ == (code), "%s: rc %d, output %s", tpl, rc_, got_ ? got_ : "-"); \
        CHECK_STR_CONTAINS(hone_error_last(), words);                                           \
    } while (0)

static void test_expressions(void)
{
    const char *v = "{\"n\": 7, \"f\": 2.5, \"s\": \"abc\", \"l\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"z\": null}";
    CHECK_RENDER("{{ n + 1 }} {{ n - 10 }} {{ n * 3 }} {{ n / 2 }} {{ n // 2 }} {{ n % 3 }} {{ -7 // 2 }} {{ -7 % 3 }}", v,
                 "8 -3 21 3.5 3 1 -4 2");
    CHECK_RENDER("{{ 2 ** 10 }} {{ f * 2 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 100.0 }} {{ 1e16 }} {{ 1e15 }}", v,
                 "1024 5.0 0.30000000000000004 1e+20 1.5e-07 100.0 1e+16 1000000000000000.0");
    CHECK_RENDER("{{ 'a' ~ n ~ z ~ true }} {{ 'x' + 'y' }} {{ 'ab' * 3 }} {{ [1] + [2] }}", v, "a7NoneTrue xy ababab [1, 2]");
    CHECK_RENDER("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 2 in l }} {{ 5 not in l }} {{ 'b' in s }} "
                 "{{ 'a' in d }}", v, "True False True True True True True True");
    CHECK_RENDER("{{ true and 'x' }} {{ false or 'y' }} {{ z or 0 }} {{ not l }} {{ 'y' if n > 5 else 'n' }} [{{ 'x' if false }}]",
                 v, "x y 0 False y []");
    CHECK_RENDER("{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ s[1] }} {{ s[::-1] }} {{ s[5] is defined }}", v,
                 "3 2 [1, 2] [3, 1] [2, 1, 3] b cba False");
    CHECK_RENDER("{{ 'h\xc3\xa9llo'[1:3] }} {{ 'h\xc3\xa9llo'|length }} {{ 'h\xc3\xa9llo'[::-1] }}", NULL,
                 "\xc3\xa9l 5 oll\xc3\xa9h");
    CHECK_RENDER("{{ d }} {{ d.a }} {{ d['b'] }} {{ d.get('q', 'dflt') }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }}",
                 v, "{'b': 2, 'a': 1} 1 2 dflt [('b', 2), ('a', 1)] ['b', 'a'] [2, 1]");
    CHECK_RENDER("{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }} {{ (1, 'b') }} {{ ('one',) }}", NULL,
                 "[1, 'a', None, True, 1.5, {'k': \"it's\"}] (1, 'b') ('one',)");
    CHECK_RENDER("[{{ missing }}] {{ missing is defined }} {{ z is none }} {{ n is number }} {{ s is string }} {{ d is mapping }} "
                 "{{ s is iterable }} {{ n is odd }} {{ 9 is divisibleby 3 }} {{ n is not none }} {{ n is eq 7 }}", v,
                 "[] False True True True True True True True True True");
    CHECK_RENDER("{{ '  x y  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a  b '.split() }}|{{ 'a,b,,c'.split(',') }}|"
                 "{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|"
                 "{{ 'a-b'.replace('-', '+') }}|{{ 'hello'.find('l') }}|{{ 'aBc'.upper() }}{{ 'aBc'.lower() }}|{{ ', '.join(['p', 'q']) }}",
                 NULL, "x y|a|['a', 'b']|['a', 'b', '', 'c']|['a,b', 'c']|True|True|a+b|2|ABCabc|p, q");
}

static void test_filters(void)
{
    const char *v = "{\"msgs\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"},"
                    "{\"role\": \"user\", \"content\": \"z\"}], \"l\": [3, 1, 2], \"s\": \"  Hi there  \"}";
    CHECK_RENDER("{{ s|trim }}|{{ s|upper }}|{{ s|lower }}|{{ s|length }}|{{ 'ab cd'|title }}|{{ 'aB'|capitalize }}", v,
                 "Hi there|  HI THERE  |  hi there  |12|Ab Cd|Ab");
    CHECK_RENDER("{{ l|first }} {{ l|last }} {{ l|length }} {{ l|join('-') }} {{ l|sort }} {{ l|reverse|list }} {{ l|sum }} "
                 "{{ ['b', 'A', 'c']|sort }} {{ ['a', 'A', 'b']|unique|list }}", v,
                 "3 2 3 3-1-2 [1, 2, 3] [2, 1, 3] 6 ['A', 'b', 'c'] ['a', 'b']");
    CHECK_RENDER("{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'eq', 'user')|"
                 "map(attribute='content')|join }} {{ msgs|map(attribute='role')|list }} {{ l|select('odd')|list }} "
                 "{{ ['a', 'B']|map('upper')|list }}",
                 v, "2 y ['user', 'assistant', 'user'] [3, 1] ['A', 'B']");
    CHECK_RENDER("[{{ missing|default('d') }}] [{{ ''|default('e', true) }}] [{{ none|default('x') }}] {{ missing|length }} "
                 "{{ '3'|int + 1 }} {{ 'x'|int }} {{ '2.5'|float }} {{ 3.9|int }} {{ -4|abs }} {{ 5|string ~ '!' }}",
                 NULL, "[d] [e] [None] 0 4 0 2.5 3 4 5!");
    CHECK_RENDER("{{ {'a': [1, {'z': none}], 'b': true}|tojson }} {{ 'caf\xc3\xa9 \"q\" \\\\ \n\t\x01'|tojson }} "
                 "{{ [1.0, 2.5, 1e20]|tojson }}", NULL,
                 "{\"a\": [1, {\"z\": null}], \"b\": true} \"caf\xc3\xa9 \\\"q\\\" \\\\ \\n\\t\\u0001\" [1.0, 2.5, 1e+20]");
    CHECK_RENDER("{{ {'a': [1, 2], 'b': {}, 'c': []}|tojson(indent=2) }}", NULL,
                 "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}");
    CHECK_RENDER("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}", NULL, "a\n  b\n\n  c|  a\n  b");
    CHECK_RENDER("{{ {'a': 1}|items|list }} {{ 'ab'|list }} {{ 'aXbX'|replace('X', '-') }}", NULL, "[('a', 1)] ['a', 'b'] a-b-");
}

static void test_statements(void)
{
    CHECK_RENDER("{% for x in [3, 1, 2] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}"
                 "{{ loop.length }} {% endfor %}", NULL, "103TrueFalse3 212FalseFalse3 321FalseTrue3 ");
    CHECK_RENDER("{% for x in [3, 1, 2] if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|"
                 "{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "3222|empty");
    CHECK_RENDER("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", NULL, "a=1;b=2;");
    CHECK_RENDER("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
                 "{{ x }}{% endfor %}", NULL, "13");
    /* a set inside a loop body lives for one iteration; a namespace carries state out */
    CHECK_RENDER("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", NULL, "12121");
    CHECK_RENDER("{% set ns = namespace(c=0) %}{% for i in [1, 2, 3] %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}", NULL,
                 "6");
    CHECK_RENDER("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set blk %}in {{ a }}{% endset %}[{{ blk }}]", NULL, "12[in 1]");
    CHECK_RENDER("{% macro greet(name, p='!') %}Hi {{ name }}{{ p }}{% endmacro %}{{ greet('Bo') }} {{ greet('Al', p='?') }}",
                 NULL, "Hi Bo! Hi Al?");
    CHECK_RENDER("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body{% endcall %}", NULL, "<body>");
    CHECK_RENDER("{% macro f(k) %}{% if k <= 1 %}1{% else %}{{ k * f(k - 1)|int }}{% endif %}{% endmacro %}{{ f(5) }}", NULL,
                 "120");
    CHECK_RENDER("{% if 0 %}a{% elif [] %}b{% elif 'x' %}c{% else %}d{% endif %}", NULL, "c");
    CHECK_RENDER("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1) }} {{ namespace(a=1).a }}", NULL,
                 "[0, 1, 2] [1, 3, 5] {'a': 1} 1");
    CHECK_RENDER("{% generation %}g{% endgeneration %}{# a comment #}", NULL, "g");
}

/* trim_blocks, lstrip_blocks, - and +, the dropped trailing newline (expected: jinja2's). */
static void test_whitespace(void)
{
    CHECK_RENDER("a\n  {% if true %}\n    x\n  {% endif %}\n  b {% if true %}y{% endif %}\n{# c #}\n  {#- c2 -#}\nend\n", NULL,
                 "a\n    x\n  b yend");
    CHECK_RENDER("{%- if true -%}\n  big\n{%- endif -%}\n!", NULL, "big!");
    CHECK_RENDER("  {%+ if true %}keep{% endif %}\n{% if true +%}\nno trim{% endif %}\n{{ 'v' }}\n  {{ 'w' }}\n", NULL,
                 "  keep\nno trimv\n  w");
    CHECK_RENDER("x  {{- ' y ' -}}  z\r\nw", NULL, "x y z\nw");
}

static void test_errors(void)
{
    CHECK_FAILS("{% include 'x' %}", NULL, HONE_EINVAL, "line 1: unsupported statement 'include'");
    CHECK_FAILS("a\n\n{{ x|frob }}", NULL, HONE_EINVAL, "line 3: unsupported filter 'frob'");
    CHECK_FAILS("{{ x is frob }}", NULL, HONE_EINVAL, "unsupported test 'frob'");
    CHECK_FAILS("{% for x in y recursive %}{% endfor %}", NULL, HONE_EINVAL, "unsupported recursive for loop");
    CHECK_FAILS("{% if x %}\n{% for a in b %}", NULL, HONE_EINVAL, "line 2: 'for' is never closed (missing 'endfor')");
    CHECK_FAILS("{% endfor %}", NULL, HONE_EINVAL, "unexpected 'endfor'");
    CHECK_FAILS("{% continue %}", NULL, HONE_EINVAL, "'continue' outside a for loop");
    CHECK_FAILS("{{ 'abc }}", NULL, HONE_EINVAL, "unterminated string literal");
    CHECK_FAILS("{{ x.y }}", NULL, HONE_EINVAL, "'x' is undefined");
    CHECK_FAILS("{{ 'a' + 1 }}", NULL, HONE_EINVAL, "unsupported operand type(s) for +: 'str' and 'int'");
    CHECK_FAILS("{{ 1 // 0 }}", NULL, HONE_EINVAL, "division or modulo by zero");
    CHECK_FAILS("{% for x in none %}{% endfor %}", NULL, HONE_EINVAL, "'NoneType' object is not iterable");
    CHECK_FAILS("{{ 'abc'.format(1) }}", NULL, HONE_EINVAL, "unsupported method str.format()");
    CHECK_FAILS("{% set x = 1 %}{% set x.y = 2 %}", NULL, HONE_EINVAL, "cannot assign attribute on non-namespace object 'x'");
    CHECK_FAILS("{{ [1].append(2) }}", NULL, HONE_EINVAL, "unsupported method list.append()");
    CHECK_FAILS("{{ x }", NULL, HONE_EINVAL, "line 1: unclosed tag");
    CHECK_FAILS("{{ {1: 2} }}", NULL, HONE_EINVAL, "unsupported dict key of type int");

    /* raise_exception: the template's message, on its own via hone_jinja_raised */
    CHECK_FAILS("line one\n{{ raise_exception('Only user and ' ~ 'assistant roles!') }}", NULL, HONE_EINVAL,
                "template line 2: raise_exception: Only user and assistant roles!");
    CHECK(hone_jinja_raised() && !strcmp(hone_jinja_raised(), "Only user and assistant roles!"));
    CHECK_RENDER("ok", NULL, "ok");
    CHECK(hone_jinja_raised() == NULL);
    CHECK_FAILS("{{ nope(1) }}", NULL, HONE_EINVAL, "'nope' is undefined");
    CHECK(hone_jinja_raised() == NULL);
}

/* Hostile templates stop with an error, not a crash, a hang or unbounded memory. */
static void test_limits(void)
{
    char *deep = malloc(20000);
    size_t n = 0;
    n += (size_t)sprintf(deep + n, "{{ ");
    for (int i = 0; i < 5000; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 5000; i++) deep[n++] = ')';
    n += (size_t)sprintf(deep + n, " }}");
    deep[n] = '\0';
    CHECK_FAILS(deep, NULL, HONE_ERANGE, "nesting deeper than");
    n = 0;
    for (int i = 0; i < 1500; i++) n += (size_t)sprintf(deep + n, "{%% if 1 %%}");
    deep[n] = '\0';
    CHECK_FAILS(deep, NULL, HONE_ERANGE, "nesting deeper than");
    free(deep);

    CHECK_FAILS("{% macro f(k) %}{{ f(k + 1) }}{% endmacro %}{{ f(0) }}", NULL, HONE_ERANGE, "macro calls nested deeper than 64");
    CHECK_FAILS("{{ range(1000000)|list|length }}", NULL, HONE_ERANGE, "range too big");
    CHECK_FAILS("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", NULL, HONE_ERANGE,
                "bytes of memory"); /* each inner range is a fresh list */
    hone_jinja_opts few = HONE_JINJA_OPTS_INIT;
    few.max_steps = 1000000;
    int src = 0;
    CHECK(render_opts("{% set r = range(100000) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}", NULL, &few,
                      &src) == NULL);
    CHECK_EQ_INT(src, HONE_ERANGE);
    CHECK_STR_CONTAINS(hone_error_last(), "ran more than 1000000 steps");
    CHECK_FAILS("{{ 'x' * 100000000000 }}", NULL, HONE_ERANGE, "exceeds");
    CHECK_FAILS("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                NULL, HONE_ERANGE, "bytes of memory");
    CHECK_FAILS("{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' * 1000 }}{% endfor %}", NULL, HONE_ERANGE,
                "the rendered text exceeds");
    CHECK_FAILS("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, HONE_ERANGE, "nested deeper than");

    hone_jinja_opts o = HONE_JINJA_OPTS_INIT;
    o.max_output = 10;
    int rc = 0;
    CHECK(render_opts("{{ 'exactly 11!' }}", NULL, &o, &rc) == NULL && rc == HONE_ERANGE);
    CHECK(render_opts("{{ '0123456789' }}", NULL, &o, &rc) != NULL);
    o.now = 1767268800; /* 2026-01-01 12:00 UTC */
    const char *d = render_opts("{{ strftime_now('%Y') }}", NULL, &o, &rc);
    CHECK(d && (!strcmp(d, "2026") || !strcmp(d, "2025")));
}

TEST_MAIN(TEST_CASE(test_expressions), TEST_CASE(test_filters), TEST_CASE(test_statements), TEST_CASE(test_whitespace),
          TEST_CASE(test_errors), TEST_CASE(test_limits))
