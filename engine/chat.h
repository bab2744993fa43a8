/* Chat templates: a model's own Jinja chat template (the GGUF's tokenizer.chat_template, or a
 * file given with --chat-template) rendered by engine/jinja exactly as transformers'
 * apply_chat_template renders it, and a builtin ChatML template only for files that have none.
 * A template the interpreter cannot run is an error naming the construct, never a fallback. */
#ifndef HONE_CHAT_H
#define HONE_CHAT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "jinja.h"
#include "tokenizer.h"

/* The family a template's text resembles (marker strings); informational since every template
 * is rendered by the interpreter. */
typedef enum {
    HONE_CHAT_CHATML = 0,  /* <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen) */
    HONE_CHAT_LLAMA2 = 1,  /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\nuser [/INST] answer </s> */
    HONE_CHAT_LLAMA3 = 2,  /* <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\n... */
    HONE_CHAT_MISTRAL = 3, /* <s>[INST] user [/INST]answer</s> */
    HONE_CHAT_OTHER = 4    /* none of the above (Gemma, DeepSeek, ...) */
} hone_chat_family;

/* Where the rendered template comes from. */
typedef enum {
    HONE_CHAT_SOURCE_GGUF = 0,    /* the model file's tokenizer.chat_template */
    HONE_CHAT_SOURCE_FILE = 1,    /* --chat-template FILE */
    HONE_CHAT_SOURCE_BUILTIN = 2  /* the model has no template: builtin ChatML */
} hone_chat_source;

/* A loaded template. The strings and the parsed template are owned (hone_chat_clear). */
typedef struct {
    hone_chat_family family;
    hone_chat_source source;
    int is_fallback;      /* 1: no template text, the builtin ChatML template renders */
    int emits_bos;        /* 1: the text uses bos_token, so encode its output with add_bos = 0 */
    size_t text_len;      /* bytes of template text (0 for the builtin) */
    char *path;           /* HONE_CHAT_SOURCE_FILE: the file; else NULL */
    char *bos_text;       /* bos_token / eos_token as the template sees them */
    char *eos_text;
    hone_jinja *jinja;    /* the parsed template */
} hone_chat_template;

typedef struct {
    const char *role;     /* "system", "user", "assistant", ... */
    const char *content;
} hone_chat_msg;

/* Variables beyond messages and tools. Options struct: designated initialisers on _INIT. */
typedef struct {
    int version;
    int add_generation_prompt;  /* append the assistant header where the template has one */
    int enable_thinking;        /* -1: left undefined (the template's default, as HF; Qwen 3
                                 * then thinks); 0 / 1: passed as false / true */
    const cJSON *extra;         /* an object of more variables (chat_template_kwargs, e.g.
                                 * date_string, tools_in_user_message); they override the
                                 * defaults above; NULL: none */
} hone_chat_render_opts;

#define HONE_CHAT_RENDER_OPTS_INIT {.version = 1, .add_generation_prompt = 1, .enable_thinking = -1, .extra = NULL}

/* Parses template text[0..len) (text NULL or len 0: the builtin ChatML template, is_fallback 1).
 * bos_text / eos_text are the model's token spellings; NULL picks the family's usual ones
 * ("<s>" / "</s>", "<|begin_of_text|>" / "<|eot_id|>"). A template outside the interpreter's
 * subset fails here with HONE_EINVAL ("chat template: template line 3: unsupported filter
 * 'xyz'"). On success the caller must hone_chat_clear(out). */
int hone_chat_detect(hone_chat_template *out, const char *text, size_t len, const char *bos_text,
                     const char *eos_text);

/* The template that renders for model g: the text of template_path when it is non-NULL
 * (source FILE), else g's tokenizer.chat_template (GGUF), else the builtin ChatML (BUILTIN).
 * bos / eos spellings come from tok when it is non-NULL and has those tokens. */
int hone_chat_load_with(hone_chat_template *out, const hone_gguf *g, const hone_tokenizer *tok,
                        const char *template_path);

/* hone_chat_load_with(out, g, tok, NULL). */
int hone_chat_load(hone_chat_template *out, const hone_gguf *g, const hone_tokenizer *tok);

/* Frees the owned strings and template and zeroes *t; accepts NULL and cleared templates. */
void hone_chat_clear(hone_chat_template *t);

/* Renders a conversation into a malloc'd NUL-terminated *out (caller frees). messages is a
 * cJSON array of OpenAI message objects (role; content a string, null, or a list of content
 * parts; tool_calls; tool_call_id; name; reasoning_content), passed to the template as they
 * are; tools is a cJSON array of OpenAI function tools or NULL (the template then sees
 * tools = none, as transformers passes it). The template also sees bos_token, eos_token,
 * add_generation_prompt, documents = none, the options' variables, and the globals
 * raise_exception and strftime_now (the local clock, so Llama 3.2 prints today's date unless
 * date_string is given). Where the template calls raise_exception (roles that do not alternate,
 * say) this returns HONE_EINVAL and hone_jinja_raised() gives the template's own message.
 * opts NULL means HONE_CHAT_RENDER_OPTS_INIT. */
int hone_chat_render(char **out, const hone_chat_template *tmpl, const cJSON *messages, const cJSON *tools,
                     const hone_chat_render_opts *opts);

/* hone_chat_render of msgs[0..n) (plain role + content strings, no tools).
 * Example (SmolLM2): {user, "Hi"} with add_generation_prompt ->
 * "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
 * "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" */
int hone_chat_format(char **out, const hone_chat_template *tmpl, const hone_chat_msg *msgs, int n,
                     int add_generation_prompt);

/* "chatml", "llama2", "llama3", "mistral", "other". */
const char *hone_chat_family_name(hone_chat_family f);

/* One line on where t comes from, for `hone info`: "the GGUF's tokenizer.chat_template (368
 * bytes, chatml-like)", "file FILE (...)", "builtin ChatML (the model file has no
 * tokenizer.chat_template)". Writes at most n bytes (NUL included) to buf and returns buf. */
const char *hone_chat_describe(const hone_chat_template *t, char *buf, size_t n);

#endif
