/* The `hone review` command. */
#ifndef HONE_REVIEW_CLI_H
#define HONE_REVIEW_CLI_H

/* `hone review list|show|verify|prune ...`: exit 0, 1 on failure, 2 on usage errors. */
int hone_cli_review(int argc, char **argv);

#endif
