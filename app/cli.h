/* Subcommands of the hone program beyond the core four (generate, info, tokenize, logits,
 * in app/main.c): each command is one row of hone_cli_commands (app/cli.c) and implements `int hone_cli_<name>(int argc, char **argv)`, where argv[0]
 * is the command's name; it returns the process exit code (0 ok, 1 failure, 2 usage). */
#ifndef HONE_CLI_H
#define HONE_CLI_H

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;   /* usage lines, indented like app/main.c's, ending in "\n" */
} hone_cli_command;

/* Terminated by a row with name == NULL. */
extern const hone_cli_command hone_cli_commands[];

/* The commands (app/ wires libraries together; the ones still defined in a library folder
 * move to app/ in their own change). */
int hone_cli_profile(int argc, char **argv); /* app/profile_cli.c */
int hone_cli_serve(int argc, char **argv);   /* app/serve_cli.c */
int hone_cli_review(int argc, char **argv);  /* candidates/review.c */
int hone_cli_tune(int argc, char **argv);    /* agent/tune.c */
int hone_cli_guard(int argc, char **argv);   /* guard/guard.c */
int hone_cli_verify(int argc, char **argv);  /* app/verify_cli.c */

/* 1 when a subcommand's arguments (argv[0] its name) ask for its usage: -h or --help before
 * any "--". The command then prints it on stdout and exits 0. */
int hone_cli_wants_help(int argc, char **argv);

#endif
