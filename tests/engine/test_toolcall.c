/* Tool calls: the parser on each format (Hermes/Qwen blocks, SmolLM2's array in a block,
 * Llama 3 JSON with and without <|python_tag|>, Mistral [TOOL_CALLS]), unknown names left as
 * content, the streaming hold-back, the rendering of tools and history, and the forcing
 * grammar. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/toolcall.h"
#include "harness.h"

static cJSON *tools(void)
{
    return cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
                       "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
                       "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\","
                       "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}}]");
}

static void parsed(const char *text, int n, const char *name0, const char *args0, const char *content)
{
    cJSON *t = tools();
    hone_toolcall_result r;
    CHECK(hone_toolcall_parse(&r, text, strlen(text), t) == 0);
    CHECK_MSG(r.n_calls == n, "%s: %d calls", text, r.n_calls);
    if (n && r.n_calls) {
        CHECK_MSG(!strcmp(r.calls[0].name, name0), "%s: name %s", text, r.calls[0].name);
        CHECK_MSG(!strcmp(r.calls[0].arguments, args0), "%s: args %s", text, r.calls[0].arguments);
    }
    if (content) CHECK_MSG(r.content && !strcmp(r.content, content), "%s: content %s", text, r.content ? r.content : "(null)");
    else CHECK_MSG(!r.content, "%s: content %s", text, r.content);
    hone_toolcall_result_clear(&r);
    cJSON_Delete(t);
}

static void test_parse_formats(void)
{
    parsed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 1,
           "get_weather", "{\"city\":\"Paris\"}", NULL);
    parsed("Let me check.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n"
           "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}</tool_call>",
           2, "add", "{\"a\":1,\"b\":2}", "Let me check.");
    /* SmolLM2: a JSON array of calls in one block */
    parsed("<tool_call>[{\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}, {\"name\": \"get_weather\", "
           "\"arguments\": {\"city\": \"Rome\"}}]</tool_call>", 2, "add", "{\"a\":3,\"b\":4}", NULL);
    /* Llama 3 */
    parsed("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}", 1, "get_weather", "{\"city\":\"Lima\"}", NULL);
    parsed("<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 5, \"b\": 6}}", 1, "add", "{\"a\":5,\"b\":6}", NULL);
    /* Mistral */
    parsed("[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 7, \"b\": 8}}]", 1, "add", "{\"a\":7,\"b\":8}", NULL);
    /* not calls */
    parsed("The weather is fine.", 0, NULL, NULL, "The weather is fine.");
    parsed("<tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call>", 0, NULL, NULL,
           "<tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call>");
    parsed("{\"city\": \"Paris\"}", 0, NULL, NULL, "{\"city\": \"Paris\"}");
}

static void test_content_prefix(void)
{
    CHECK_EQ_INT(hone_toolcall_content_prefix("Hello there", 11), 11);
    CHECK_EQ_INT(hone_toolcall_content_prefix("Hello <tool", 11), 6);
    CHECK_EQ_INT(hone_toolcall_content_prefix("Hi <tool_call>{", 15), 3);
    CHECK_EQ_INT(hone_toolcall_content_prefix("a < b", 5), 5);
    CHECK_EQ_INT(hone_toolcall_content_prefix("  {\"na", 6), 0);
    CHECK_EQ_INT(hone_toolcall_content_prefix("[TOOL_C", 7), 0);
    CHECK_EQ_INT(hone_toolcall_content_prefix("\n", 1), 0);
}

/* Every prefix of a call: the name once its string closed, the arguments a growing prefix
 * of their final bytes, done at the end. */
static void scan_prefixes(const char *text, int want, const char *name1, const char *args1)
{
    size_t n = strlen(text), prev = 0;
    for (size_t len = 0; len <= n; len++) {
        hone_toolcall_partial p[4];
        int k = hone_toolcall_scan(text, len, p, 4);
        CHECK_MSG(k <= want, "%.*s: %d calls", (int)len, text, k);
        if (k >= 1 && p[0].name_done) CHECK_MSG(!strcmp(p[0].name, name1), "name %s", p[0].name);
        if (k >= 1 && p[0].args_started) {
            CHECK_MSG(p[0].args_len <= strlen(args1) && !strncmp(text + p[0].args_off, args1, p[0].args_len),
                      "%.*s: args %.*s", (int)len, text, (int)p[0].args_len, text + p[0].args_off);
            CHECK(p[0].args_len >= prev);
            prev = p[0].args_len;
        }
        if (len == n) {
            CHECK_EQ_INT(k, want);
            CHECK(k >= 1 && p[0].name_done && p[0].args_done && p[0].args_len == strlen(args1));
            for (int i = 0; i < k && i < 4; i++) CHECK(p[i].name_done && p[i].args_done);
        }
    }
}

static void test_scan(void)
{
    scan_prefixes("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": [2, \"}\"]}}\n</tool_call>", 1,
                  "add", "{\"a\": 1, \"b\": [2, \"}\"]}");
    scan_prefixes("<tool_call>[{\"name\": \"x\", \"arguments\": {}}, {\"name\": \"y\", \"arguments\": {\"k\": 2}}]</tool_call>",
                  2, "x", "{}");
    scan_prefixes("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}", 1, "get_weather",
                  "{\"city\": \"Lima\"}");
    scan_prefixes("[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 7}}]", 1, "add", "{\"a\": 7}");
    hone_toolcall_partial p[2];
    CHECK_EQ_INT(hone_toolcall_scan("Sure, here it is", 16, p, 2), 0);
}

static void test_render(void)
{
    cJSON *t = tools();
    cJSON *msgs = cJSON_Parse(
        "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]");
    cJSON *out = NULL;
    CHECK(hone_toolcall_render(&out, msgs, t, HONE_TOOLCALL_HERMES, "You are SmolLM.") == 0);
    CHECK_EQ_INT(cJSON_GetArraySize(out), 4);
    const char *sys = cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "content")->valuestring;
    CHECK(!strncmp(sys, "You are SmolLM.\n\n# Tools\n", 25));
    CHECK_STR_CONTAINS(sys, "<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"");
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 2), "content")->valuestring,
                  "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"));
    cJSON *res = cJSON_GetArrayItem(out, 3);
    CHECK(!strcmp(cJSON_GetObjectItem(res, "role")->valuestring, "user"));
    CHECK(!strcmp(cJSON_GetObjectItem(res, "content")->valuestring, "<tool_response>\nsunny\n</tool_response>"));
    cJSON_Delete(out);
    CHECK(hone_toolcall_render(&out, msgs, t, HONE_TOOLCALL_LLAMA3, NULL) == 0);
    CHECK_EQ_INT(cJSON_GetArraySize(out), 3);
    CHECK_STR_CONTAINS(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "content")->valuestring, "Given the following functions");
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "content")->valuestring,
                  "{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Paris\"}}"));
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 2), "role")->valuestring, "ipython"));
    cJSON_Delete(out);
    CHECK(hone_toolcall_render(&out, msgs, t, HONE_TOOLCALL_MISTRAL, NULL) == 0);
    CHECK_EQ_INT(cJSON_GetArraySize(out), 3);
    CHECK(!strncmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "content")->valuestring, "[AVAILABLE_TOOLS] [", 19));
    CHECK(!strncmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "content")->valuestring, "[TOOL_CALLS] [{", 15));
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 2), "content")->valuestring,
                  "[TOOL_RESULTS] {\"content\":\"sunny\"}[/TOOL_RESULTS]"));
    cJSON_Delete(out);
    cJSON *badm = cJSON_Parse("[{\"role\":\"robot\",\"content\":\"x\"}]");
    CHECK(hone_toolcall_render(&out, badm, t, HONE_TOOLCALL_HERMES, NULL) == HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "messages[0].role");
    cJSON_Delete(badm);
    cJSON_Delete(msgs);
    cJSON_Delete(t);
}

static void test_grammar(void)
{
    cJSON *t = tools();
    hone_grammar *g = NULL;
    hone_toolcall_style hermes, llama3, nemo = {.native = 1, .format = HONE_TOOLCALL_MISTRAL, .open = "[TOOL_CALLS]["};
    hone_toolcall_style_fallback(&hermes, HONE_TOOLCALL_HERMES);
    hone_toolcall_style_fallback(&llama3, HONE_TOOLCALL_LLAMA3);
    CHECK(!strcmp(hermes.open, "<tool_call>\n") && !strcmp(llama3.open, "") && !hermes.native);
    CHECK(hone_toolcall_grammar(&g, t, NULL, &hermes) == 0);
    const char *ok1 = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>";
    const char *ok2 = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>";
    const char *no1 = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    const char *no2 = "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}";
    CHECK(hone_grammar_accepts(g, ok1, strlen(ok1)) && hone_grammar_accepts(g, ok2, strlen(ok2)));
    CHECK(!hone_grammar_accepts(g, no1, strlen(no1)) && !hone_grammar_accepts(g, no2, strlen(no2)));
    hone_grammar_free(g);
    CHECK(hone_toolcall_grammar(&g, t, "get_weather", &llama3) == 0);
    const char *l1 = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    const char *l2 = "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}";
    CHECK(hone_grammar_accepts(g, l1, strlen(l1)) && !hone_grammar_accepts(g, l2, strlen(l2)));
    hone_grammar_free(g);
    CHECK(hone_toolcall_grammar(&g, t, "add", &nemo) == 0); /* the opening the template taught */
    const char *m1 = "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]";
    const char *m2 = "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]";
    CHECK(hone_grammar_accepts(g, m1, strlen(m1)) && !hone_grammar_accepts(g, m2, strlen(m2)));
    hone_grammar_free(g);
    CHECK(hone_toolcall_grammar(&g, t, "nope", &hermes) == HONE_EINVAL && !g);
    /* bounds and patterns: guidance for a tool that is not strict (relaxed away), a refusal for
     * one that is (the compiler cannot enforce them) */
    cJSON *b = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"page\",\"parameters\":{\"type\":\"object\","
                           "\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1},\"q\":{\"type\":\"string\","
                           "\"pattern\":\"^[a-z]+$\"}},\"required\":[\"n\"]}}}]");
    CHECK(hone_toolcall_grammar(&g, b, NULL, &hermes) == 0);
    const char *b1 = "<tool_call>\n{\"name\": \"page\", \"arguments\": {\"n\": 0, \"q\": \"X\"}}\n</tool_call>";
    CHECK(g && hone_grammar_accepts(g, b1, strlen(b1))); /* a superset: the bounds are not enforced */
    hone_grammar_free(g);
    g = NULL;
    cJSON_AddBoolToObject(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(b, 0), "function"), "strict", 1);
    CHECK(hone_toolcall_grammar(&g, b, NULL, &hermes) == HONE_EUNSUPPORTED && !g);
    CHECK(strstr(hone_error_last(), "'minimum'") != NULL);
    cJSON_Delete(b);
    cJSON_Delete(t);
}

/* Templates for the style probe: one that renders tools, calls and results in Mistral Nemo's
 * syntax; one that renders tools but not calls (as Granite 3.3's); one without tool syntax
 * that insists on alternating roles (as Gemma 3's). */
static const char NEMO_LIKE[] =
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- if tools %}[AVAILABLE_TOOLS]{{ tools|tojson }}"
    "[/AVAILABLE_TOOLS]{% endif %}[INST]{{ m.content }}[/INST]"
    "{%- elif m.tool_calls is defined %}[TOOL_CALLS][{% for c in m.tool_calls %}{{ c.function|tojson }}"
    "{{ ', ' if not loop.last }}{% endfor %}]</s>"
    "{%- elif m.role == 'tool' %}[TOOL_RESULTS]{\"content\": {{ m.content|tojson }}, \"call_id\": \"{{ m.tool_call_id }}\"}[/TOOL_RESULTS]"
    "{%- elif m.role == 'system' %}SYS {{ m.content }}\n{%- else %}{{ m.content }}</s>{% endif %}{% endfor %}";
static const char TOOLS_NO_CALLS[] =
    "{% if tools %}TOOLS {{ tools|tojson }}\n{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
static const char ALTERNATING[] =
    "{%- set ns = namespace(i=0) %}{%- for m in messages %}{%- if m.role != 'system' %}"
    "{%- if (m.role == 'user') != (ns.i % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}"
    "{%- set ns.i = ns.i + 1 %}{% endif %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";

static void test_style_and_prompt(void)
{
    hone_chat_template tm;
    hone_toolcall_style st;
    CHECK(hone_chat_detect(&tm, NEMO_LIKE, strlen(NEMO_LIKE), "<s>", "</s>") == 0);
    tm.family = HONE_CHAT_MISTRAL;
    hone_toolcall_style_of(&st, &tm);
    CHECK(st.native && st.format == HONE_TOOLCALL_MISTRAL && !strcmp(st.open, "[TOOL_CALLS]["));
    /* the native prompt: developer is system, text parts joined, null content "", string
     * arguments parsed, ids mapped to 9 alphanumerics (the same for a call and its result) */
    cJSON *t = tools();
    cJSON *msgs = cJSON_Parse(
        "[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Be \"},{\"type\":\"text\",\"text\":\"brief.\"}]},"
        "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_0123456789abcdef\",\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_0123456789abcdef\",\"content\":\"sunny\"}]");
    char *out = NULL;
    CHECK(hone_toolcall_prompt(&out, &tm, &st, msgs, t) == 0);
    CHECK_STR_CONTAINS(out, "SYS Be brief.[AVAILABLE_TOOLS][{\"type\": \"function\"");
    CHECK_STR_CONTAINS(out, "[INST]Weather in Paris?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</s>");
    const char *cid = out ? strstr(out, "\"call_id\": \"") : NULL;
    CHECK(cid && strlen(cid) > 21 && cid[21] == '"');
    for (int i = 12; cid && i < 21; i++) CHECK(isalnum((unsigned char)cid[i]));
    char id9[32];
    hone_toolcall_id(id9, sizeof id9, &st, 12345);
    CHECK_EQ_INT((int)strlen(id9), 9);
    hone_toolcall_style_fallback(&st, HONE_TOOLCALL_HERMES);
    hone_toolcall_id(id9, sizeof id9, &st, 1);
    CHECK(!strcmp(id9, "call_0000000000000001"));
    free(out);
    hone_chat_clear(&tm);

    /* tools without call history: the fallback (Hermes for a ChatML family) */
    CHECK(hone_chat_detect(&tm, TOOLS_NO_CALLS, strlen(TOOLS_NO_CALLS), "<s>", "</s>") == 0);
    hone_toolcall_style_of(&st, &tm);
    CHECK(!st.native && st.format == HONE_TOOLCALL_HERMES && !strcmp(st.open, "<tool_call>\n"));
    hone_chat_clear(&tm);

    /* no tool syntax, alternating roles: the fallback's tool result is a user turn, and a user
     * question after it is joined to that turn rather than refused */
    CHECK(hone_chat_detect(&tm, ALTERNATING, strlen(ALTERNATING), "<s>", "</s>") == 0);
    hone_toolcall_style_of(&st, &tm);
    CHECK(!st.native && st.format == HONE_TOOLCALL_HERMES);
    cJSON_AddItemToArray(msgs, cJSON_Parse("{\"role\":\"user\",\"content\":\"And tomorrow?\"}"));
    CHECK(hone_toolcall_prompt(&out, &tm, &st, msgs, t) == 0);
    CHECK_STR_CONTAINS(out, "<user><tool_response>\nsunny\n</tool_response>\n\nAnd tomorrow?</user><assistant>");
    CHECK_STR_CONTAINS(out, "<assistant><tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call></assistant>");
    free(out);
    /* a refusal that joining does not cure keeps the template's message */
    cJSON *two = cJSON_Parse("[{\"role\":\"assistant\",\"content\":\"x\"}]");
    CHECK(hone_toolcall_prompt(&out, &tm, &st, two, t) == HONE_EINVAL && !out);
    CHECK_STR_CONTAINS(hone_error_last(), "roles must alternate");
    cJSON_Delete(two);
    hone_chat_clear(&tm);
    cJSON_Delete(msgs);
    cJSON_Delete(t);
}

TEST_MAIN(TEST_CASE(test_parse_formats), TEST_CASE(test_content_prefix), TEST_CASE(test_scan), TEST_CASE(test_render),
          TEST_CASE(test_grammar), TEST_CASE(test_style_and_prompt))
