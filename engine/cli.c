/* The table of subcommands implemented outside engine/main.c. */
#include "cli.h"

#include <stddef.h>

int hone_cli_profile(int argc, char **argv); /* profiler/profile_cli.c */

const hone_cli_command hone_cli_commands[] = {
    {"profile", hone_cli_profile,
     "  profile -m MODEL [--device cpu|cuda|auto] [--tokens N] [--prompt N] [-t THREADS] [--json]\n"
     "                          time every slot over a prompt and N decode steps; rank the hot\n"
     "                          slots by expected gain (share x headroom to the roofline)\n"},
    {NULL, NULL, NULL},
};
