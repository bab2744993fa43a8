#!/usr/bin/env python3
"""engine/jinja against Python's jinja2, rendered the way transformers' apply_chat_template
renders (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, a
{% generation %} block, HF's tojson, raise_exception, strftime_now).

Renders every shipped template (tests/chat/templates/*.jinja) with many conversations, and a
corpus of small templates that exercise single constructs, through both; the outputs must be
byte-identical, and where jinja2 fails the C interpreter must fail too (with the same message
when the template called raise_exception).

Needs the jinja_render helper (HONE_JINJA_RENDER, set by CMake) and jinja2; without them it
reports skipped (77)."""
import datetime
import json
import os
import subprocess
import sys
import tempfile

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = 1767268800  # 2026-01-01 12:00:00 UTC, strftime_now's clock on both sides


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %} renders its body (transformers' AssistantTracker)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW).strftime(fmt)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[Generation, jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now


def render_py(template, variables):
    try:
        return {"ok": True, "out": ENV.from_string(template).render(**variables)}
    except jinja2.exceptions.TemplateError as e:
        raised = str(e) if type(e) is jinja2.exceptions.TemplateError else None
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "raised": raised}
    except Exception as e:  # TypeError, ValueError, ... from inside the template
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "raised": None}


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web — with ünïcode and \"quotes\"",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
    {"type": "function", "function": {
        "name": "plan", "description": "Make a plan",
        "parameters": {"type": "object", "properties": {
            "steps": {"type": "array", "items": {"type": "string"}, "description": "Steps to take"},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Counts"},
            "flag": {"type": "boolean", "description": "A flag", "default": False},
            "score": {"type": "number", "description": "Score", "minimum": 0.5}},
            "required": ["steps"]}}},
]

# a union type (Hermes 3's template recurses on it until Python's recursion limit; hone's
# macro depth limit stops it too)
TOOLS_UNION = TOOLS + [{"type": "function", "function": {
    "name": "note", "description": "Take a note", "parameters": {"type": "object", "properties": {
        "maybe": {"type": ["string", "null"], "description": "Optional note"}}}}}]

CALL1 = {"id": "call12345", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
CALL2 = {"id": "call67890", "type": "function",
         "function": {"name": "search", "arguments": {"q": "population of Paris"}}}
CALL_STR = {"id": "callabcde", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}

U = lambda s: {"role": "user", "content": s}
A = lambda s: {"role": "assistant", "content": s}
S = lambda s: {"role": "system", "content": s}

CONVERSATIONS = [
    ("one user", [U("Hi")], None, True),
    ("system + user", [S("You are terse."), U("What is 2+2?")], None, True),
    ("multi-turn", [S("You are terse."), U("What is 2+2?"), A("4"), U("And 3+3?")], None, True),
    ("no gen prompt", [U("Hello"), A("Hi there!")], None, False),
    ("padded unicode", [U("  padded question \n"), A(" padded answer\t\u3000"), U("ça va? 日本語 🙂")], None, True),
    ("empty", [], None, True),
    ("system only", [S("Only a system prompt.")], None, True),
    ("tools", [U("Weather in Paris?")], TOOLS, True),
    ("tools + system", [S("Use tools wisely."), U("Weather in Paris?")], TOOLS, True),
    ("tool call round trip", [S("Be helpful."), U("Weather in Paris?"),
                              {"role": "assistant", "content": "", "tool_calls": [CALL1]},
                              {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
                               "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
                              A("It is 21 degrees and clear.")], TOOLS, False),
    ("tool call pending", [U("Weather in Paris?"),
                           {"role": "assistant", "content": "", "tool_calls": [CALL1]},
                           {"role": "tool", "tool_call_id": "call12345", "content": "21 C"}], TOOLS, True),
    ("two tool calls", [U("Weather and population of Paris?"),
                        {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL1, CALL2]},
                        {"role": "tool", "tool_call_id": "call12345", "content": "21 C"},
                        {"role": "tool", "tool_call_id": "call67890", "content": "2.1 million"}], TOOLS, True),
    ("string arguments", [U("Weather in Rome?"),
                          {"role": "assistant", "content": "", "tool_calls": [CALL_STR]},
                          {"role": "tool", "tool_call_id": "callabcde", "content": "18 C"}], TOOLS, True),
    ("null content tool call", [U("Weather in Paris?"),
                                {"role": "assistant", "content": None, "tool_calls": [CALL1]},
                                {"role": "tool", "tool_call_id": "call12345", "content": "21 C"}], TOOLS, True),
    ("content parts", [{"role": "system", "content": [{"type": "text", "text": "Sys part."}]},
                       {"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                    {"type": "text", "text": " Part two."}]}], None, True),
    ("thinking", [U("Solve 2+2"), A("<think>\nadd them\n</think>\n\n4"), U("Now 3+3")], None, True),
    ("thinking last", [U("Solve 2+2"), A("<think>\nadd them\n</think>\n\n4")], None, False),
    ("reasoning field", [U("Q"), {"role": "assistant", "content": "A", "reasoning_content": "because"}, U("Q2")],
     None, True),
    ("not alternating", [U("a"), U("b")], None, True),
    ("named user", [{"role": "user", "content": "Hi", "name": "alice"}], None, True),
    ("developer role", [{"role": "developer", "content": "Dev rules."}, U("Hi")], None, True),
    ("union tool type", [U("Note this")], TOOLS_UNION, True),
    ("quotes and braces", [U("{{ not a tag }} {% neither %} 'single' \"double\" \\ back")], None, True),
]

# More variables some templates read (chat_template_kwargs), each a further pass over every
# conversation.
EXTRAS = {
    "qwen3": [(" enable_thinking=false", {"enable_thinking": False}), (" enable_thinking=true", {"enable_thinking": True})],
    "deepseek-v3.1": [(" thinking", {"thinking": True})],
    "granite3.3": [(" thinking", {"thinking": True}),
                   (" documents", {"documents": [{"doc_id": 1, "text": "Paris is in France."}],
                                   "controls": {"citations": True}})],
    "llama3.1": [(" tools in system", {"tools_in_user_message": False})],
}

TOKENS = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "qwen2.5": ("<|endoftext|>", "<|im_end|>"),
    "qwen3": ("<|endoftext|>", "<|im_end|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "gemma3": ("<bos>", "<eos>"),
    "mistral-v0.3": ("<s>", "</s>"),
    "mistral-nemo": ("<s>", "</s>"),
    "deepseek-r1-distill-qwen": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "llama2": ("<s>", "</s>"),
    "mistral-v0.1": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "hermes3-tool-use": ("<|begin_of_text|>", "<|im_end|>"),
    "granite3.3": ("<|end_of_text|>", "<|end_of_text|>"),
    "deepseek-v3.1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "phi3.5": ("<s>", "<|endoftext|>"),
}

# Small templates, one construct each (rendered with CORPUS_VARS).
CORPUS_VARS = {"s": "  Hello, World  ", "n": 7, "f": 2.5, "l": [3, 1, 2], "d": {"b": 2, "a": 1},
               "msgs": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
                        {"role": "user", "content": "z"}], "none": None, "t": True, "u8": "héllo wörld",
               "big": 1e20, "small": 1.5e-7, "neg": -3}
CORPUS = [
    "{{ s|trim }}|{{ s|upper }}|{{ s|lower }}|{{ s|length }}|{{ u8|length }}|{{ 'ab cd'|title }}|{{ 'aB'|capitalize }}",
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}",
    "{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}",
    "{{ 'abc'.replace('b', 'BB') }}|{{ 'abc'|replace('c', '') }}|{{ 'hello'.find('l') }}|{{ 'héllo'.find('l') }}|{{ 'a-b'.upper() }}",
    "{{ l }}|{{ l|first }}|{{ l|last }}|{{ l|length }}|{{ l|join(', ') }}|{{ l|sort }}|{{ l|reverse|list }}|{{ l[::-1] }}|{{ l[1:] }}|{{ l[:-1] }}",
    "{{ 'hello'[1:3] }}|{{ 'hello'[::-1] }}|{{ u8[1:4] }}|{{ u8[-3:] }}|{{ 'hello'[::2] }}|{{ l[-1] }}|{{ 'abc'[1] }}",
    "{{ d }}|{{ d|items|list }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.get('a') }}|{{ d.get('z', 'no') }}|{{ d['b'] }}|{{ d.b }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }}{% if not loop.last %}, {% endif %}{% endfor %}",
    "{% for x in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}",
    "{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}",
    "{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
    "{% set x = 1 %}{% for i in l %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
    "{% set ns = namespace(c=0, found=false) %}{% for i in l %}{% set ns.c = ns.c + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.c }} {{ ns.found }}",
    "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}",
    "{% set blk %}inside {{ n }}{% endset %}[{{ blk }}]",
    "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Cy') }}",
    "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body {{ n }}{% endcall %}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{{ n + 1 }} {{ n - 10 }} {{ n * 3 }} {{ n / 2 }} {{ n // 2 }} {{ n % 3 }} {{ neg // 2 }} {{ neg % 5 }} {{ 2 ** 10 }} {{ f * 2 }} {{ -n }}",
    "{{ 'a' ~ n ~ none ~ t }} {{ 'x' + 'y' }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ n ~ '' }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ t == 1 }} {{ n != 7 }} {{ 2 in l }} {{ 5 not in l }} {{ 'ell' in s }} {{ 'a' in d }}",
    "{{ true and 'x' }} {{ false or 'y' }} {{ none or 0 }} {{ not l }} {{ not [] }} {{ 'yes' if t else 'no' }} {{ 'yes' if none else 'no' }} [{{ 'x' if false }}]",
    "{{ n is number }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ s is iterable }} {{ l is sequence }} {{ none is none }} {{ t is true }} {{ t is false }} {{ t is boolean }}",
    "{{ missing is defined }} {{ missing is undefined }} {{ n is defined }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ n is integer }} {{ f is float }} {{ 'ab' is lower }} {{ 'AB' is upper }}",
    "{{ n is eq 7 }} {{ n is equalto 8 }} {{ n is ne 1 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ n is ge 7 }} {{ n is le 6 }} {{ 2 is in l }} {{ none is sameas none }} {{ n is not none }}",
    "[{{ missing }}] [{{ missing|default('dflt') }}] [{{ ''|default('e', true) }}] [{{ none|default('x') }}] [{{ missing|length }}] [{{ missing|list }}]",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|join }} {{ msgs|map(attribute='role')|list }}",
    "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ ['a', 'B']|map('upper')|list }} {{ msgs|selectattr('content')|list|length }} {{ [none, 1, 0]|select|list }}",
    "{{ d|tojson }} {{ l|tojson }} {{ s|tojson }} {{ none|tojson }} {{ t|tojson }} {{ f|tojson }} {{ msgs|tojson(indent=2) }} {{ [{}, []]|tojson(indent=4) }}",
    "{{ 'é\"\\\\\n\t\x01'|tojson }} {{ {'k': [1, {'z': none}]}|tojson }} {{ big }} {{ small }} {{ big|tojson }} {{ 0.1 + 0.2 }} {{ 1e15 }} {{ 1e16 }} {{ 100.0 }} {{ -0.0 }}",
    "{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }} {{ ('t', 1) }} {{ {'a': [1, 2]} }} {{ 'q\"uote' }} {{ ['q\"uote', \"it's\", 'b\\\\s'] }}",
    "{{ '3'|int + 1 }} {{ 'x'|int }} {{ '2.5'|float }} {{ 3.9|int }} {{ n|float }} {{ neg|abs }} {{ n|string ~ '!' }} {{ l|sum }} {{ msgs|map(attribute='content')|sum(start='>') if false }} {{ [[1], [2]]|sum(start=[]) }}",
    "{{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ l|sort(reverse=true) }} {{ msgs|sort(attribute='content', reverse=true)|map(attribute='content')|join }} {{ ['a', 'A', 'b', 'a']|unique|list }}",
    "{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\nb'|indent('> ') }}",
    "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
    "{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %b %Y') }}",
    "{{ msgs[0].role }} {{ msgs[-1]['content'] }} {{ msgs[5] is defined }} {{ (msgs|last).content }} {{ msgs|first|tojson }}",
    "{%- if n > 5 -%}\n  big\n{%- elif n > 2 -%}\n  mid\n{%- else -%}\n  small\n{%- endif -%}\n!",
    "a\n  {% if true %}\n    x\n  {% endif %}\n  b {% if true %}y{% endif %}\n{# comment #}\n  {#- c2 -#}\nend\n",
    "  {%+ if true %}keep{% endif %}\n{% if true +%}\nno trim{% endif %}\n{{ 'v' }}\n  {{ 'w' }}\n",
    "{% generation %}gen {{ n }}{% endgeneration %}",
    "{{ raise_exception('custom failure ' ~ n) }}",
    "{{ missing.attr }}",
    "{{ 'a' + 1 }}",
    "{{ none + 1 }}",
    "{{ 1 / 0 }}",
    "{% for x in none %}{% endfor %}",
    "{{ 'x' in none }}",
    "{{ msgs[0]['role']['deep']['deeper'] }}",
    "{% set x = 1 %}{% set x.y = 2 %}",
    "{{ 'abc'.nosuch() }}",
    "{{ d.items()|list }} {{ d|list }} {{ 'ab'|list }}",
]

UNSUPPORTED = [  # (template, words the error message must contain)
    ("{% include 'x.html' %}", ["line 1", "unsupported statement 'include'"]),
    ("a\n{% extends 'base' %}", ["line 2", "'extends'"]),
    ("{{ x|nosuchfilter }}", ["unsupported filter 'nosuchfilter'"]),
    ("{{ x is nosuchtest }}", ["unsupported test 'nosuchtest'"]),
    ("{% for x in y recursive %}{% endfor %}", ["recursive"]),
    ("{% if x %}\n\n{% for a in b %}", ["line 3", "never closed", "endfor"]),
    ("{{ x }\n", ["line 1"]),
    ("{% endif %}", ["unexpected 'endif'"]),
    ("{% break %}", ["outside a for loop"]),
    ("{% frobnicate %}", ["unknown statement 'frobnicate'"]),
    ("{{ f(*args) }}", ["*args"]),
    ("{% raw %}x{% endraw %}", ["unsupported statement 'raw'"]),
]


def mutants(templates, n, seed):
    """n random edits of the shipped templates (cuts, inserted Jinja tokens, copies, truncations)."""
    import random
    rnd = random.Random(seed)
    toks = ["{{", "}}", "{%", "%}", "{#", "#}", "-", "(", ")", "[", "]", "{", "}", "'", '"', "\\", "|", ".", ",", ":",
            "if", "for", "endfor", "endif", "else", "in", "not", "is", "loop", "ns", "~", "+", "*", "**", "//", "%",
            "0", "-1", "namespace(", "raise_exception(", "messages", "tojson", "\n", " ", "macro", "endmacro",
            "call", "caller()", "set", "=", "[::-1]", "range("]
    texts = list(templates.values())
    out = []
    for _ in range(n):
        t = rnd.choice(texts)
        for _ in range(rnd.randint(1, 6)):
            op, p = rnd.random(), rnd.randrange(len(t) + 1)
            if op < 0.3:
                t = t[:p] + t[p + rnd.randint(1, 20):]
            elif op < 0.7:
                t = t[:p] + rnd.choice(toks) + t[p:]
            elif op < 0.85:
                q = rnd.randrange(len(t) + 1)
                t = t[:p] + t[min(p, q):max(p, q)] + t[p:]
            else:
                t = t[:p]
        out.append(t)
    return out


def load_templates():
    out = {}
    tdir = os.path.join(HERE, "templates")
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".jinja"):
            with open(os.path.join(tdir, name), encoding="utf-8") as fh:
                out[name[:-len(".jinja")]] = fh.read()
    return out


def run_c(cases):
    helper = os.environ.get("HONE_JINJA_RENDER")
    if not helper or not os.path.exists(helper):
        print("HONE_JINJA_RENDER (the jinja_render helper) is not set: skipped")
        sys.exit(77)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(cases, fh, ensure_ascii=False)
        path = fh.name
    try:
        res = subprocess.run([helper, path], capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    if res.returncode != 0:
        print(res.stderr)
        sys.exit(1)
    return json.loads(res.stdout)


def same(py, c):
    if py["ok"] or c["ok"]:
        return py["ok"] == c["ok"] and py.get("out") == c.get("out")
    return py["raised"] == c.get("raised")  # both failed; raise_exception messages must agree


def main():
    templates = load_templates()
    cases, meta = [], []
    for tname, text in templates.items():
        bos, eos = TOKENS.get(tname, ("<s>", "</s>"))
        for cname, msgs, tools, gen in CONVERSATIONS:
            for ename, extra in [("", {})] + EXTRAS.get(tname, []):
                variables = {"messages": msgs, "tools": tools, "documents": None, "add_generation_prompt": gen,
                             "bos_token": bos, "eos_token": eos, "date_string": "26 Jul 2024", **extra}
                cases.append({"template": text, "vars": variables, "now": NOW})
                meta.append(("template", tname, cname + ename))
    for i, text in enumerate(CORPUS):
        cases.append({"template": text, "vars": CORPUS_VARS, "now": NOW})
        meta.append(("corpus", "#%d" % i, text))
    py = [render_py(c["template"], c["vars"]) for c in cases]
    cres = run_c(cases)
    assert len(cres) == len(cases)
    failures = 0
    per_template = {}
    for (kind, name, what), p, c in zip(meta, py, cres):
        ok = same(p, c)
        if kind == "template":
            t = per_template.setdefault(name, [0, 0, 0])
            t[0] += 1
            t[1] += ok
            t[2] += not p["ok"]
        if not ok:
            failures += 1
            print("MISMATCH %s %s [%s]\n  jinja2: %r\n  hone:   %r" % (kind, name, what, p, c))
    for name, (n, good, errs) in per_template.items():
        print("%-26s %3d/%d identical (%d where both raise)" % (name, good, n, errs))
    print("corpus: %d snippets" % len(CORPUS))

    # Mutated templates: hone answers every one (no crash, no hang: the helper would die), and
    # where both render, the outputs agree.
    fuzz_vars = {"messages": CONVERSATIONS[9][1], "tools": TOOLS, "add_generation_prompt": True,
                 "bos_token": "<s>", "eos_token": "</s>", "date_string": "26 Jul 2024"}
    fuzz = [{"template": t, "vars": fuzz_vars, "now": NOW} for t in mutants(templates, 600, 1234)]
    fres = run_c(fuzz)
    assert len(fres) == len(fuzz)
    both = disagree = 0
    for case, c in zip(fuzz, fres):
        p = render_py(case["template"], case["vars"])
        if p["ok"] and c["ok"]:
            both += 1
            if p["out"] != c["out"]:
                failures += 1
                print("FUZZ MISMATCH %r\n  jinja2: %r\n  hone:   %r" % (case["template"][:200], p["out"][:200], c["out"][:200]))
        elif p["ok"] != c["ok"]:
            disagree += 1
    print("fuzz: %d mutants, %d rendered by both (identical), %d accepted by only one of the two" % (len(fuzz), both, disagree))

    # Unsupported constructs: errors that name the construct and the line, in hone alone.
    ures = run_c([{"template": t, "vars": {}} for t, _ in UNSUPPORTED])
    for (t, words), r in zip(UNSUPPORTED, ures):
        if r["ok"] or not all(w in r["error"] for w in words):
            failures += 1
            print("BAD ERROR for %r: %r (want %r)" % (t, r, words))
    print("%d mismatches" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
