/* Subcommands of the hone program beyond the core four (generate, info, tokenize, logits,
 * in engine/main.c): each module adds its command as one row of hone_cli_commands
 * (engine/cli.c) and implements `int hone_cli_<name>(int argc, char **argv)`, where argv[0]
 * is the command's name; it returns the process exit code (0 ok, 1 failure, 2 usage). */
#ifndef HONE_CLI_H
#define HONE_CLI_H

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;   /* usage lines, indented like engine/main.c's, ending in "\n" */
} hone_cli_command;

/* Terminated by a row with name == NULL. */
extern const hone_cli_command hone_cli_commands[];

#endif
