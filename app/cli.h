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

struct hone_backend;
struct hone_model;
struct hone_kernel_loader;

/* --kernels DIR (generate, logits, serve): the approved CPU kernels of DIR replace the baselines
 * they differ from in be's slot table (candidates/kernel_loader.h); *kl owns their objects and
 * is freed after the backend. A backend without a CPU slot table keeps its own kernels (a line
 * on stderr). Returns 0 or a negative HONE_E* code. */
int hone_cli_load_kernels(struct hone_kernel_loader **kl, struct hone_backend *be, const struct hone_model *m,
                          const char *dir);

#endif
