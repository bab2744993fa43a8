/* Tool calling for the chat endpoint: the prompt of a conversation with tools (through the
 * model's own chat template where that template renders tools, calls and results itself, else
 * as plain role/content messages in one of the formats below), the model's tool-call output
 * parsed back into calls, and the grammar that forces a call.
 *
 * Formats (what the output parser recognises, whatever the family):
 *   Hermes / Qwen / SmolLM2  <tool_call>{"name": N, "arguments": {...}}</tool_call> (one per
 *                            block, or a JSON array of calls in one block, as SmolLM2 writes)
 *   Llama 3                  [<|python_tag|>]{"name": N, "parameters": {...}} at the start
 *   Mistral                  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] at the start
 * A call counts only when its name is one of the request's tools. */
#ifndef HONE_TOOLCALL_H
#define HONE_TOOLCALL_H

#include <stddef.h>

#include "chat.h"
#include "grammar.h"

struct cJSON;

typedef enum {
    HONE_TOOLCALL_HERMES = 0,  /* ChatML family */
    HONE_TOOLCALL_LLAMA3 = 1,
    HONE_TOOLCALL_MISTRAL = 2  /* Mistral and Llama 2 families */
} hone_toolcall_format;

/* The format of the fallback rendering for a template family: Llama 3 for Llama 3, Mistral for
 * Mistral and Llama 2, Hermes for the rest. */
hone_toolcall_format hone_toolcall_format_for(hone_chat_family f);

/* How a chat template takes tools (hone_toolcall_style_of). */
typedef struct {
    int native;                  /* 1: the template renders tools, assistant tool_calls and tool
                                  * results itself, in format */
    hone_toolcall_format format; /* what the prompt teaches: what calls are parsed as and forced in */
    char open[24];               /* the text before a call's JSON ("<tool_call>\n", "[TOOL_CALLS] [",
                                  * "[TOOL_CALLS][" for Mistral Nemo, "" for Llama 3) */
} hone_toolcall_style;

/* The fallback style of format fmt (not native; fmt's usual opening). */
void hone_toolcall_style_fallback(hone_toolcall_style *out, hone_toolcall_format fmt);

/* Renders a probe conversation (a tool, an assistant call of it, the tool's result) through t
 * with tools, as hone_toolcall_prompt would: the template is native when the tool's description,
 * the call's arguments and the result all appear in its output and the call is written in a
 * format the parser knows (<tool_call> blocks, [TOOL_CALLS], or Llama 3's {"name", "parameters"});
 * open is then taken from that output. Otherwise (no tool syntax, as SmolLM2's and Gemma 3's
 * templates; tools but no call history, as Granite 3.3's; a template that raises) the fallback
 * style of t's family. */
void hone_toolcall_style_of(hone_toolcall_style *out, const hone_chat_template *t);

/* The prompt text (malloc'd, caller frees) of OpenAI chat messages and tools (may be NULL) with
 * the generation prompt, in style st:
 *   native: the messages passed to the template as transformers' apply_chat_template passes
 *     them, after the conversions OpenAI clients need: "developer" is "system", text parts
 *     are joined into one string, null content is "", a call's arguments given as a JSON
 *     string are parsed into the object templates expect, and (Mistral format) call ids that
 *     are not 9 alphanumerics map to 9 (a hash, the same for a call and its result);
 *   fallback: hone_toolcall_render's messages through the template; where the template
 *     refuses them (raise_exception: roles that must alternate, as Gemma's), consecutive
 *     turns of one role are joined and rendered again.
 * HONE_EINVAL with the message for malformed messages or tools and for a template that raises. */
int hone_toolcall_prompt(char **out, const hone_chat_template *t, const hone_toolcall_style *st,
                         const struct cJSON *messages, const struct cJSON *tools);

/* A tool-call id for random bits r in style st: "call_" and 16 hex digits, or 9 alphanumerics
 * in Mistral format (its templates refuse other ids). Writes at most cap bytes (NUL included). */
void hone_toolcall_id(char *out, size_t cap, const hone_toolcall_style *st, unsigned long long r);

/* OpenAI chat messages (system/developer, user, assistant with optional tool_calls, tool)
 * and tools (may be NULL) -> *out, a new cJSON array of {"role", "content"} string pairs in
 * the format's conventions:
 *   Hermes: the tools block of Qwen2.5's template appended to the system message
 *     (default_system, or "", when the conversation has none); assistant calls as
 *     <tool_call> blocks; tool results as a user turn of <tool_response> blocks;
 *   Llama 3: the tools in the first user message as Llama 3.1's JSON tool prompt; calls as
 *     {"name", "parameters"}; results as the "ipython" role;
 *   Mistral: [AVAILABLE_TOOLS] before the last user message's text; calls as [TOOL_CALLS];
 *     results as [TOOL_RESULTS] folded into the user turn.
 * HONE_EINVAL (message names the field) for malformed messages or tools. */
int hone_toolcall_render(struct cJSON **out, const struct cJSON *messages, const struct cJSON *tools,
                         hone_toolcall_format fmt, const char *default_system);

/* The grammar of one call in style st (its format's keys, after st->open): of the tool named
 * name, or of any tool when name is NULL; its arguments follow the tool's parameters schema
 * (engine/json_schema.h). HONE_EINVAL when no tool has that name; the schema compiler's
 * errors otherwise. */
int hone_toolcall_grammar(hone_grammar **out, const struct cJSON *tools, const char *name,
                          const hone_toolcall_style *st);

typedef struct {
    char *name;
    char *arguments; /* JSON text of the arguments object */
} hone_toolcall;

typedef struct {
    hone_toolcall *calls;
    int n_calls;
    char *content;   /* the text outside the calls, trimmed; NULL when empty */
} hone_toolcall_result;

/* Finds the tool calls in text[0..len) (any format above) among the names of tools. */
int hone_toolcall_parse(hone_toolcall_result *out, const char *text, size_t len, const struct cJSON *tools);
void hone_toolcall_result_clear(hone_toolcall_result *r);

/* Streaming: a call as far as text[0..len) has it. The name counts once its string has closed;
 * the arguments are the raw bytes of their value (text[args_off, args_off + args_len)), which
 * grow as the text does, args_done once the value has closed. */
typedef struct {
    char name[128];
    int name_done;
    int args_started, args_done, args_is_string;
    size_t args_off, args_len;
} hone_toolcall_partial;

/* The calls (complete or in progress, in order) that text[0..len) begins: a JSON call or
 * array of calls after an optional <|python_tag|> or [TOOL_CALLS], or <tool_call> blocks.
 * Fills up to cap entries and returns how many it found. */
int hone_toolcall_scan(const char *text, size_t len, hone_toolcall_partial *calls, int cap);

/* Streaming: how many bytes at the start of text[0..len) are surely content, not the start
 * of a tool call (a marker, or a JSON value at the very start); the rest must be held until
 * more text (or the end) decides. */
size_t hone_toolcall_content_prefix(const char *text, size_t len);

#endif
