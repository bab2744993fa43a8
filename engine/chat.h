/* Chat templates without a Jinja interpreter: recognise the family of a model's
 * tokenizer.chat_template (ChatML, Llama-2, Llama-3, Mistral) and render conversations
 * byte-for-byte as the official templates do. */
#ifndef HONE_CHAT_H
#define HONE_CHAT_H

#include <stddef.h>

#include "gguf.h"
#include "tokenizer.h"

typedef enum {
    HONE_CHAT_CHATML = 0,  /* <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen) */
    HONE_CHAT_LLAMA2 = 1,  /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\nuser [/INST] answer </s> */
    HONE_CHAT_LLAMA3 = 2,  /* <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\n... */
    HONE_CHAT_MISTRAL = 3  /* <s>[INST] user [/INST]answer</s> (Mistral-7B-Instruct v0.1/v0.2) */
} hone_chat_family;

/* A recognised template. Plain data; the strings are owned (free with hone_chat_clear). */
typedef struct {
    hone_chat_family family;
    int is_fallback;       /* 1: no or unrecognised template text, ChatML assumed */
    int emits_bos;         /* 1: the text starts with the bos token, so encode it with add_bos = 0 */
    int eos_space;         /* Mistral v0.1: a space follows each assistant eos */
    char *default_system;  /* ChatML: the system turn the template inserts when the first
                            * message is not a system one (SmolLM2's "You are a helpful AI
                            * assistant named SmolLM, ..."); NULL if none */
    char *bos_text;        /* spelling of bos_token / eos_token in the rendered text */
    char *eos_text;
} hone_chat_template;

typedef struct {
    const char *role;     /* "system", "user", "assistant", ... */
    const char *content;
} hone_chat_msg;

/* Recognises template text[0..len) (text may be NULL: fallback). bos_text / eos_text are the
 * model's token spellings; NULL picks the family's usual ones ("<s>" / "</s>",
 * "<|begin_of_text|>" / "<|eot_id|>"). On success the caller must hone_chat_clear(out). */
int hone_chat_detect(hone_chat_template *out, const char *text, size_t len, const char *bos_text,
                     const char *eos_text);

/* hone_chat_detect on g's tokenizer.chat_template (absent: ChatML fallback), with the bos /
 * eos spellings taken from tok when it is non-NULL and has those tokens. */
int hone_chat_load(hone_chat_template *out, const hone_gguf *g, const hone_tokenizer *tok);

/* Frees the owned strings and zeroes *t; accepts NULL and cleared templates. */
void hone_chat_clear(hone_chat_template *t);

/* Renders msgs[0..n) into a malloc'd NUL-terminated string (caller frees), exactly as the
 * official Jinja template would; add_generation_prompt appends the assistant header where
 * the family has one (Llama-2 and Mistral templates have none and ignore it). Where the
 * template would raise_exception (Llama-2 / Mistral roles that do not alternate
 * user/assistant, Mistral system messages, Llama-2 with no messages) this returns HONE_EINVAL
 * with that message.
 * Example (SmolLM2): {user, "Hi"} with add_generation_prompt ->
 * "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
 * "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" */
int hone_chat_format(char **out, const hone_chat_template *tmpl, const hone_chat_msg *msgs, int n,
                     int add_generation_prompt);

/* "chatml", "llama2", "llama3", "mistral". */
const char *hone_chat_family_name(hone_chat_family f);

#endif
