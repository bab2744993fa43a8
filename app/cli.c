/* The table of subcommands beyond app/main.c's core four. */
#include "app/cli.h"

#include <stddef.h>
#include <string.h>

const hone_cli_command hone_cli_commands[] = {
    {"profile", hone_cli_profile,
     "  profile -m MODEL [--device cpu|cuda|auto] [--tokens N] [--prompt N] [-t THREADS] [--json]\n"
     "                          time every slot over a prompt and N decode steps; rank the hot\n"
     "                          slots by expected gain (share x headroom to the roofline)\n"},
    {"review", hone_cli_review,
     "  review list|show|verify|prune [BRANCH] [--repo DIR]\n"
     "                          kernel proposals on hone/* branches of the kernels repository\n"
     "                          (`hone review help` for details)\n"},
    {"serve", hone_cli_serve,
     "  serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--ctx N] [--max-batch N]\n"
     "        [--kv-blocks N] [-t THREADS] [--log-requests]\n"
     "                          OpenAI-compatible HTTP API with continuous batching\n"
     "                          (`hone serve --help` for all options)\n"},
    {"guard", hone_cli_guard,
     "  guard -m MODEL --slot SLOT --backend cpu|cuda FILE [--state-dir DIR] [--evidence OUT.json]\n"
     "        [--threshold 1.05] [--seed S]\n"
     "                          run a candidate kernel through every parity and speed gate in an\n"
     "                          isolated worker; exit 0 accepted, 1 rejected or not evaluated\n"},
    {"tune", hone_cli_tune,
     "  tune -m MODEL [--llm URL|self|none] [--budget N] [--slot SLOT] [--no-commit]\n"
     "                          profile, rewrite the hottest slot (LLM or search), guard every\n"
     "                          candidate, commit the accepted ones to review branches\n"},
    {"verify", hone_cli_verify,
     "  verify --reference R --candidate C [--prompts FILE.jsonl] [--steps N] [--report DIR]\n"
     "                          how close a candidate (GGUF file or OpenAI-compatible URL) is to\n"
     "                          a reference: KL, top-1 agreement, flip rate, survival\n"},
    {NULL, NULL, NULL},
};

int hone_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}
