/* Tool calling for the chat endpoint: the tools and the tool-call history rendered as plain
 * role/content messages for engine/chat.c (until the chat templates are interpreted), the
 * model's tool-call output parsed back into calls, and the grammar that forces a call.
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

hone_toolcall_format hone_toolcall_format_for(hone_chat_family f);

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

/* The grammar of one call in fmt: of the tool named name, or of any tool when name is NULL;
 * its arguments follow the tool's parameters schema (engine/json_schema.h). HONE_EINVAL
 * when no tool has that name; the schema compiler's errors otherwise. */
int hone_toolcall_grammar(hone_grammar **out, const struct cJSON *tools, const char *name,
                          hone_toolcall_format fmt);

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
