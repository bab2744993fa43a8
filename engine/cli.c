/* The table of subcommands implemented outside engine/main.c. */
#include "cli.h"

#include <stddef.h>

const hone_cli_command hone_cli_commands[] = {
    {NULL, NULL, NULL},
};
