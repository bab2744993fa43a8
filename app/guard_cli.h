/* The `hone guard` command and its option parser (which `hone review verify` shares). */
#ifndef HONE_GUARD_CLI_H
#define HONE_GUARD_CLI_H

#include "guard/guard.h"

/* Parses `hone guard` options (-m/--model, --slot, --backend, --state-dir, --evidence,
 * --threshold, --seed, --prompts, --steps, --reps, --quiet) from argv[0..argc) into o, which
 * keeps what it already holds for options not given; the one non-option argument goes to *file
 * (file NULL: none allowed). Returns 0, 1 for -h/--help, or HONE_EINVAL naming the argument.
 * Example: hone_guard_cli_parse_opts(&o, NULL, 2, (char *[]){"--reps", "11"}). */
int hone_guard_cli_parse_opts(hone_guard_opts *o, const char **file, int argc, char **argv);

/* `hone guard`: exit 0 accepted, 1 rejected / not evaluated, 2 usage. */
int hone_cli_guard(int argc, char **argv);

#endif
