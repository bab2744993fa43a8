/* The agentic checks of `hone verify` (agent/verify.h): prompts that offer tools, sent as chat
 * completions to both sides (each an OpenAI-compatible endpoint; a GGUF side is served in
 * process on loopback by verify.c, through the same chat path `hone serve` runs), greedily.
 * With the reference's behaviour as the truth, the candidate's tool-call trigger is scored by
 * precision, recall and F1; where both call, the tool names and the arguments (as JSON values)
 * are compared; each side's arguments are checked against the called tool's parameters schema
 * (engine/json_schema.h's validator). Prompts labelled with the expected behaviour score each
 * side against the label too. */
#ifndef HONE_VERIFY_TOOLS_H
#define HONE_VERIFY_TOOLS_H

#include "agent/llm.h"

struct cJSON;

typedef struct {
    char *id, *set;
    struct cJSON *messages, *tools; /* OpenAI chat messages and function tools (owned) */
    struct cJSON *tool_choice;      /* owned; NULL: not sent (the endpoint's default, auto) */
    int expect;                     /* the label: 1 a tool call is right, 0 an answer is, -1 none */
} hone_verify_tool_prompt;

/* One JSONL line's object j (it has "messages" and "tools") -> *p; HONE_EFORMAT naming what is
 * wrong (where: "FILE:LINE"). p is filled with copies; hone_verify_tool_prompt_clear frees. */
int hone_verify_tool_prompt_parse(hone_verify_tool_prompt *p, const struct cJSON *j, const char *where);
void hone_verify_tool_prompt_clear(hone_verify_tool_prompt *p);

/* Sends prompts[0..n) to ref and cand (greedy, at most max_tokens each) and appends one object
 * per prompt to out_prompts (id, set, "reference"/"candidate": called, calls [{name,
 * arguments, schema_valid, why}], content, finish_reason — or error and http_status when that
 * side refused the request with a 4xx; trigger_agree, names_agree, arguments_agree where both
 * answered). Errors: an endpoint that cannot be reached, fails otherwise, or answers without
 * choices[0].message. */
int hone_verify_tools_run(struct cJSON *out_prompts, hone_llm *ref, hone_llm *cand,
                          const hone_verify_tool_prompt *prompts, int n, int max_tokens, int quiet);

/* Over the tool prompts in prompts (objects with "reference"/"candidate") that both sides
 * answered (refused_by_reference / _candidate count the others): prompts, tp / fp /
 * fn / tn (the candidate's trigger against the reference's), precision, recall, f1 (where a
 * denominator is 0 the rate is 1 when nothing was missed or added, as when neither side ever
 * calls), name_agreement and arguments_agreement (over prompts where both call),
 * schema_valid_reference / _candidate (fractions of their calls; null without calls), and with
 * labels: labelled, reference_vs_label / candidate_vs_label {precision, recall, f1}. */
struct cJSON *hone_verify_tools_summarise(const struct cJSON *prompts);

#endif
