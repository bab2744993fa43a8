/* The grammar core, the JSON Schema compiler and the vocabulary mask: accepted and rejected
 * strings, refused schema features, and the trie-walk mask against a brute-force check of
 * every token of SmolLM2's vocabulary (or the tiny model's when SmolLM2 is absent). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/tokenizer.h"
#include "harness.h"

static hone_grammar *schema(const char *json)
{
    cJSON *s = cJSON_Parse(json);
    hone_grammar *g = NULL;
    int rc = hone_json_schema_compile(&g, s, NULL);
    CHECK_MSG(rc == 0, "compile %s: %s", json, hone_error_last());
    cJSON_Delete(s);
    return g;
}

#define ACCEPT(g, str) CHECK_MSG(hone_grammar_accepts(g, str, strlen(str)), "should accept: %s", str)
#define REJECT(g, str) CHECK_MSG(!hone_grammar_accepts(g, str, strlen(str)), "should reject: %s", str)

static void test_builder(void)
{
    hone_grammar *g;
    CHECK(hone_grammar_new(&g) == 0);
    int d = hone_grammar_rule(g), root = hone_grammar_rule(g);
    hone_grammar_alt(g, d);
    hone_grammar_add_range(g, d, '0', '9');
    hone_grammar_add_ref(g, d, d);
    hone_grammar_alt(g, d);
    hone_grammar_add_range(g, d, '0', '9');
    hone_grammar_alt(g, root);
    hone_grammar_add_literal(g, root, "n=", 2);
    hone_grammar_add_ref(g, root, d);
    CHECK(hone_grammar_finish(g, root) == 0);
    ACCEPT(g, "n=0");
    ACCEPT(g, "n=123456");
    REJECT(g, "n=");
    REJECT(g, "n=12a");
    REJECT(g, "m=1");
    hone_grammar_matcher *m;
    CHECK(hone_grammar_matcher_new(&m, g) == 0);
    CHECK(hone_grammar_matcher_feed(m, "n=4", 3) == 0);
    CHECK(hone_grammar_matcher_accepting(m) && !hone_grammar_matcher_done(m));
    CHECK(hone_grammar_matcher_feed(m, "x", 1) == HONE_EINVAL);
    CHECK(hone_grammar_matcher_try(m, "55", 2) && !hone_grammar_matcher_try(m, "5-", 2));
    CHECK(hone_grammar_matcher_feed(m, "2", 1) == 0 && hone_grammar_matcher_accepting(m));
    hone_grammar_matcher_free(m);
    hone_grammar *c;
    CHECK(hone_grammar_clone(&c, g) == 0);
    ACCEPT(c, "n=99");
    hone_grammar_free(c);
    hone_grammar_free(g);
    /* a reference to a rule that was never given alternatives */
    CHECK(hone_grammar_new(&g) == 0);
    root = hone_grammar_rule(g);
    int empty = hone_grammar_rule(g);
    hone_grammar_alt(g, root);
    hone_grammar_add_ref(g, root, empty);
    CHECK(hone_grammar_finish(g, root) == HONE_EINVAL);
    hone_grammar_free(g);
}

static void test_json_object(void)
{
    hone_grammar *g = NULL;
    CHECK(hone_json_schema_compile(&g, NULL, NULL) == 0);
    ACCEPT(g, "{}");
    ACCEPT(g, "{\"a\": [1, 2.5e-3, true, null, \"x\\n\\u00e9\"], \"b\": {\"c\": {}}}");
    ACCEPT(g, "{\n  \"k\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\n}");
    REJECT(g, "[]");
    REJECT(g, "{\"a\": 01}");
    REJECT(g, "{\"a\": 1,}");
    REJECT(g, "{\"a\" 1}");
    REJECT(g, "{\"a\": \"\x01\"}");        /* raw control character */
    REJECT(g, "{\"a\": \"\xc3\"}");        /* truncated UTF-8 */
    REJECT(g, "{\"a\": \"\\ud800\"}");      /* lone surrogate escape */
    REJECT(g, "{\"a\": tru}");
    REJECT(g, "{}  ");                     /* nothing after the value */
    hone_grammar_free(g);
}

static void test_schema_object(void)
{
    hone_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":3},"
                             "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
                             "{\"enum\":[\"a\",\"b\"]},\"minItems\":1,\"maxItems\":2}},"
                             "\"required\":[\"name\",\"tags\"],\"additionalProperties\":false}");
    if (!g) return;
    ACCEPT(g, "{\"name\":\"abc\",\"age\":-12,\"tags\":[\"a\"]}");
    ACCEPT(g, "{\"name\": \"\", \"tags\": [\"a\", \"b\"]}");
    ACCEPT(g, "{ \"name\" : \"x\" , \"tags\" : [ \"b\" ] }");
    REJECT(g, "{\"name\":\"abcd\",\"tags\":[\"a\"]}");       /* maxLength */
    REJECT(g, "{\"name\":\"a\",\"tags\":[]}");              /* minItems */
    REJECT(g, "{\"name\":\"a\",\"tags\":[\"a\",\"a\",\"b\"]}"); /* maxItems */
    REJECT(g, "{\"tags\":[\"a\"]}");                        /* required name */
    REJECT(g, "{\"name\":\"a\",\"tags\":[\"c\"]}");          /* enum */
    REJECT(g, "{\"name\":\"a\",\"age\":1.5,\"tags\":[\"a\"]}"); /* integer */
    REJECT(g, "{\"name\":\"a\",\"tags\":[\"a\"],\"x\":1}");  /* additional */
    REJECT(g, "{\"tags\":[\"a\"],\"name\":\"a\"}");          /* declared order */
    hone_grammar_free(g);
    g = schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    ACCEPT(g, "\"ab\"");
    ACCEPT(g, "\"\\u00e9\xc3\xa9\\n\"");
    REJECT(g, "\"a\"");
    REJECT(g, "\"abcd\"");
    hone_grammar_free(g);
}

static void test_schema_combinators(void)
{
    hone_grammar *g = schema("{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"number\"},{\"const\":{\"k\":[1]}}]}");
    ACCEPT(g, "null");
    ACCEPT(g, "-0.5E+10");
    ACCEPT(g, "{\"k\":[1]}");
    REJECT(g, "\"s\"");
    REJECT(g, "1.");
    hone_grammar_free(g);
    g = schema("{\"type\":[\"boolean\",\"string\"]}");
    ACCEPT(g, "false");
    ACCEPT(g, "\"x\"");
    REJECT(g, "0");
    hone_grammar_free(g);
    g = schema("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}");
    ACCEPT(g, "7");
    ACCEPT(g, "\"7\"");
    hone_grammar_free(g);
    /* recursion through $defs: a linked list */
    g = schema("{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":"
               "{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
               "\"required\":[\"v\",\"next\"]}}}");
    ACCEPT(g, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}");
    REJECT(g, "{\"v\":1,\"next\":{\"v\":2}}");
    hone_grammar_free(g);
    g = schema("{\"allOf\":[{\"$ref\":\"#/definitions/e\"}],\"definitions\":{\"e\":{\"enum\":[\"x\",3,null]}}}");
    ACCEPT(g, "3");
    ACCEPT(g, "\"x\"");
    REJECT(g, "\"y\"");
    hone_grammar_free(g);
}

static void refused(const char *json, const char *needle)
{
    cJSON *s = cJSON_Parse(json);
    hone_grammar *g = NULL;
    int rc = hone_json_schema_compile(&g, s, NULL);
    CHECK_MSG(rc == HONE_EUNSUPPORTED && !g, "%s: rc %d", json, rc);
    CHECK_STR_CONTAINS(hone_error_last(), needle);
    cJSON_Delete(s);
}

static void test_schema_refused(void)
{
    refused("{\"type\":\"string\",\"pattern\":\"^a+$\"}", "'pattern'");
    refused("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"minimum\":0}}}", "'minimum'");
    refused("{\"type\":\"string\",\"format\":\"date\"}", "'format'");
    refused("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "oneOf");
    refused("{\"$ref\":\"http://x/y.json\"}", "'$ref'");
    refused("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":2}]}", "allOf");
}

/* The mask from the trie walk equals, token by token, what a second matcher says of each
 * token's bytes, in several states of a schema. */
static void mask_vs_brute(const hone_token_trie *t, const hone_grammar *g, const char *prefix)
{
    hone_grammar_matcher *a, *b;
    CHECK(hone_grammar_matcher_new(&a, g) == 0 && hone_grammar_matcher_new(&b, g) == 0);
    CHECK(hone_grammar_matcher_feed(a, prefix, strlen(prefix)) == 0);
    CHECK(hone_grammar_matcher_feed(b, prefix, strlen(prefix)) == 0);
    int64_t n_allowed = -1, count = 0, bad = 0;
    const uint64_t *mask = hone_grammar_matcher_mask(a, t, &n_allowed);
    CHECK(mask != NULL);
    int64_t nv = hone_token_trie_n_vocab(t);
    for (int32_t id = 0; mask && id < nv; id++) {
        size_t len;
        const char *bytes = hone_token_trie_bytes(t, id, &len);
        int want = hone_token_trie_is_eog(t, id) ? hone_grammar_matcher_accepting(b)
                   : bytes ? hone_grammar_matcher_try(b, bytes, len) : 0;
        int got = (int)(mask[id >> 6] >> (id & 63) & 1);
        count += got;
        if (got != want && bad++ < 5) fprintf(stderr, "prefix %s token %d: mask %d, brute %d\n", prefix, id, got, want);
    }
    CHECK_MSG(bad == 0, "%lld tokens differ after %s", (long long)bad, prefix);
    CHECK_EQ_INT(count, n_allowed);
    CHECK(n_allowed > 0);
    /* a second call is the cached mask */
    CHECK(hone_grammar_matcher_mask(a, t, NULL) == mask);
    hone_grammar_matcher_free(a);
    hone_grammar_matcher_free(b);
}

static void test_mask(void)
{
    const char *path = harness_smollm2();
    char tiny[4096];
    snprintf(tiny, sizeof tiny, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    hone_gguf *gg = NULL;
    hone_tokenizer *tok = NULL;
    hone_token_trie *t = NULL;
    if (hone_gguf_open(&gg, path ? path : tiny) || hone_tokenizer_new(&tok, gg)) {
        CHECK_MSG(0, "cannot load a tokenizer: %s", hone_error_last());
        goto done;
    }
    CHECK(hone_token_trie_new(&t, tok) == 0);
    if (!t) goto done;
    CHECK_EQ_INT(hone_token_trie_n_vocab(t), hone_tokenizer_n_vocab(tok));
    CHECK(hone_token_trie_n_nodes(t) > 0);
    hone_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                             "\"n\":{\"type\":\"number\"},\"ok\":{\"type\":\"boolean\"},\"xs\":{\"type\":\"array\","
                             "\"items\":{\"type\":\"integer\"}}},\"required\":[\"name\",\"n\",\"ok\",\"xs\"]}");
    static const char *const prefixes[] = {"", "{", "{\"na", "{\"name\": \"", "{\"name\": \"ab\xc3",
                                           "{\"name\": \"a\\", "{\"name\": \"a\", \"n\": 1",
                                           "{\"name\": \"a\", \"n\": 1.5e", "{\"name\": \"a\", \"n\": 1, \"ok\": t",
                                           "{\"name\": \"a\", \"n\": 1, \"ok\": true, \"xs\": [1, 2] "};
    for (size_t i = 0; g && i < sizeof prefixes / sizeof prefixes[0]; i++) mask_vs_brute(t, g, prefixes[i]);
    /* end of generation exactly in an accepting state */
    if (g) {
        hone_grammar_matcher *m;
        CHECK(hone_grammar_matcher_new(&m, g) == 0);
        const char *full = "{\"name\": \"a\", \"n\": 1, \"ok\": true, \"xs\": []}";
        CHECK(hone_grammar_matcher_feed(m, full, strlen(full)) == 0);
        CHECK(hone_grammar_matcher_done(m));
        int64_t n = -1;
        const uint64_t *mask = hone_grammar_matcher_mask(m, t, &n);
        int32_t eos = hone_tokenizer_eos(tok);
        CHECK(mask && eos >= 0 && (mask[eos >> 6] >> (eos & 63) & 1));
        CHECK(hone_grammar_matcher_accept_token(m, t, eos) == 0);
        hone_grammar_matcher_free(m);
        CHECK(hone_grammar_matcher_new(&m, g) == 0);
        CHECK(hone_grammar_matcher_accept_token(m, t, eos) == HONE_EINVAL);
        hone_grammar_matcher_free(m);
    }
    /* matchers sharing a memo: the same masks as a matcher of its own, walked once */
    if (g) {
        hone_grammar_memo *memo;
        hone_grammar_matcher *a, *b, *own;
        CHECK(hone_grammar_memo_new(&memo, g) == 0);
        CHECK(hone_grammar_matcher_new_shared(&a, memo) == 0 && hone_grammar_matcher_new_shared(&b, memo) == 0);
        CHECK_EQ_INT(hone_grammar_memo_refs(memo), 3);
        CHECK(hone_grammar_matcher_new(&own, g) == 0);
        const char *pre = "{\"name\": \"x";
        CHECK(hone_grammar_matcher_feed(a, pre, strlen(pre)) == 0 && hone_grammar_matcher_feed(own, pre, strlen(pre)) == 0);
        int64_t na = 0, no = 0;
        const uint64_t *ma = hone_grammar_matcher_mask(a, t, &na);
        int64_t states = hone_grammar_memo_n_states(memo);
        const uint64_t *mo = hone_grammar_matcher_mask(own, t, &no);
        CHECK(ma && mo && na == no && !memcmp(ma, mo, (size_t)((hone_token_trie_n_vocab(t) + 63) / 64) * 8));
        CHECK(hone_grammar_matcher_feed(b, pre, strlen(pre)) == 0);
        CHECK(hone_grammar_matcher_mask(b, t, NULL) == ma); /* b finds a's mask */
        CHECK_EQ_INT(hone_grammar_memo_n_states(memo), states);
        hone_grammar_matcher_free(a);
        hone_grammar_matcher_free(own);
        hone_grammar_memo_free(memo);
        CHECK_EQ_INT(hone_grammar_memo_refs(memo), 1); /* b's */
        hone_grammar_matcher_free(b);
    }
    hone_grammar_free(g);
    /* applying a mask */
    float logits[130];
    uint64_t mk[3] = {0x5ull, 0, 1ull << 1};
    for (int i = 0; i < 130; i++) logits[i] = 1.0f;
    hone_grammar_mask_apply(mk, logits, 130);
    int finite = 0;
    for (int i = 0; i < 130; i++) finite += logits[i] == 1.0f;
    CHECK_EQ_INT(finite, 3);
    CHECK(logits[0] == 1.0f && logits[2] == 1.0f && logits[129] == 1.0f && logits[1] == -INFINITY);
    uint64_t mk2[3] = {~0ull & ~(1ull << 63), ~0ull, 0}; /* mixed, all allowed, none allowed (partial word) */
    for (int i = 0; i < 130; i++) logits[i] = (float)i;
    hone_grammar_mask_apply(mk2, logits, 130);
    finite = 0;
    for (int i = 0; i < 130; i++) finite += logits[i] == (float)i;
    CHECK_EQ_INT(finite, 127);
    CHECK(logits[63] == -INFINITY && logits[64] == 64.0f && logits[127] == 127.0f && logits[128] == -INFINITY &&
          logits[129] == -INFINITY);
done:
    hone_token_trie_free(t);
    hone_tokenizer_free(tok);
    hone_gguf_free(gg);
}

/* SentencePiece vocabularies spell a byte twice (<0x41> and A): tokens with the same bytes
 * are allowed together. */
static void test_mask_spm(void)
{
    hone_gguf *gg = NULL;
    hone_tokenizer *tok = NULL;
    hone_token_trie *t = NULL;
    if (hone_gguf_open(&gg, HONE_TEST_DATA_DIR "/tiny-llama-spm-f32.gguf") || hone_tokenizer_new(&tok, gg) ||
        hone_token_trie_new(&t, tok)) {
        CHECK_MSG(0, "spm vocabulary: %s", hone_error_last());
        goto done;
    }
    hone_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"A\":{\"type\":\"string\"}},\"required\":[\"A\"]}");
    static const char *const prefixes[] = {"", "{\"", "{\"A\": \"", "{\"A\": \"xy"};
    for (size_t i = 0; g && i < sizeof prefixes / sizeof prefixes[0]; i++) mask_vs_brute(t, g, prefixes[i]);
    int32_t a = hone_tokenizer_find(tok, "<0x41>");
    size_t len = 0;
    const char *b = a >= 0 ? hone_token_trie_bytes(t, a, &len) : NULL;
    CHECK(b && len == 1 && b[0] == 'A'); /* the byte token is in the trie beside the letter */
    hone_grammar_free(g);
done:
    hone_token_trie_free(t);
    hone_tokenizer_free(tok);
    hone_gguf_free(gg);
}

TEST_MAIN(TEST_CASE(test_builder), TEST_CASE(test_mask_spm), TEST_CASE(test_json_object), TEST_CASE(test_schema_object),
          TEST_CASE(test_schema_combinators), TEST_CASE(test_schema_refused), TEST_CASE(test_mask))
