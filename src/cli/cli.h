/* Shared pieces of the membudget command-line tool. */
#ifndef MB_CLI_CLI_H
#define MB_CLI_CLI_H
#include <stdio.h>

enum { MB_EXIT_OK = 0, MB_EXIT_INPUT = 1, MB_EXIT_USAGE = 2, MB_EXIT_NO_FIT = 3, MB_EXIT_NO_CUDA = 4 };

/* Subcommands: argv[0] is the subcommand name. Return an exit code. */
int mb_cmd_info(int argc, char **argv);
int mb_cmd_shapes(int argc, char **argv);
int mb_cmd_ops(int argc, char **argv);
int mb_cmd_estimate(int argc, char **argv);
int mb_cmd_gpus(int argc, char **argv);
int mb_cmd_measure(int argc, char **argv);
int mb_cmd_alloc_replay(int argc, char **argv);
int mb_cmd_alloc_diff(int argc, char **argv);
int mb_cmd_sweep(int argc, char **argv);
#include "membudget/membudget.h"
/* --dim NAME=VALUE into setup; returns an exit code. */
int mb_cli_parse_dim(mb_setup *setup, const char *arg);
/* --limit NAME=VALUE into setup as limit.NAME (docs/limits.md); returns an exit code. */
int mb_cli_parse_limit(mb_setup *setup, const char *arg);
/* The setup flags several commands share, selected by `which` (MB_CLI_TRAINABILITY: --freeze,
 * --trainable; MB_CLI_DIMS: --batch, --batch-dim, --dim; always: --limit). If argv[*i] is one of them, applies
 * it (advancing *i past its value), sets *rc (exit code) and returns 1; else returns 0. */
enum { MB_CLI_TRAINABILITY = 1, MB_CLI_DIMS = 2 };
int mb_cli_setup_flag(mb_setup *setup, int which, int argc, char **argv, int *i, int *rc);

/* estimate's training flags (--optimizer, --precision, --gpu, ..., --ema, --cuda-device): if
 * argv[*i] is one, applies it as mb_cli_setup_flag does and returns 1; *device_given is set
 * for --gpu and --device-memory. */
int mb_cli_training_flag(mb_setup *setup, int argc, char **argv, int *i, int *rc, int *device_given);
/* Apply --backend before every other option (it sets their defaults). */
int mb_cli_backend_first(mb_setup *setup, int argc, char **argv);
/* Measured mode (cmd_measure.c): the MEMBUDGET_CUDA_RUNTIME, ... variables into the setup's
 * cuda_* keys; then a measuring session, or MB_EXIT_NO_CUDA with the reason on stderr. */
int mb_cli_cuda_env(mb_setup *setup);
int mb_cli_measure_open(const mb_setup *setup, mb_measure **out);

/* svg_file.c: write data to path (a flag's value), the reason on stderr if it cannot be;
 * returns an exit code. mb_cli_timeline draws the step's timeline (mb_timeline_svg, titled with
 * the model's file name) into out_path: the static estimate's step, or with a measured budget
 * the simulated step at its batch size and device memory. */
int mb_cli_write_file(const char *flag, const char *path, const char *data);
int mb_cli_timeline(const mb_model *m, mb_setup *s, const mb_budget *measured, const char *model_path,
                    const char *out_path);

/* The whole file (a snapshot); NULL with the reason on stderr. The caller frees it. */
unsigned char *mb_cli_slurp(const char *path, size_t *size);

/* Print "membudget: <msg>" to stderr, a hint to run --help, and return MB_EXIT_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int mb_cli_usage_error(const char *fmt, ...);
#endif
