/* The table of subcommands beyond app/main.c's core four. */
#include "app/cli.h"

#include <stddef.h>
#include <stdio.h>

#include "candidates/kernel_loader.h"
#include "engine/backend.h"

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
    {NULL, NULL, NULL},
};

int hone_cli_load_kernels(hone_kernel_loader **kl, hone_backend *be, const hone_model *m, const char *dir)
{
    if (!dir) return 0;
    hone_slot_table *slots = hone_backend_slots(be);
    if (!slots) {
        fprintf(stderr, "hone: --kernels: only CPU kernels are loaded at present; %s keeps its own\n",
                hone_backend_describe(be));
        return 0;
    }
    hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
    ko.kernels_dir = dir;
    ko.model = m;
    return hone_kernel_loader_new(kl, slots, &ko);
}
