/* The `hone tune` command. */
#ifndef HONE_TUNE_CLI_H
#define HONE_TUNE_CLI_H

/* `hone tune -m MODEL ...`: exit 0 when the loop ran, 1 on failure, 2 on usage errors. */
int hone_cli_tune(int argc, char **argv);

#endif
