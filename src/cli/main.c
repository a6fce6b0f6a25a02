/* membudget: the command-line front end. Data goes to stdout, diagnostics to stderr.
 * Exit codes: 0 ok, 1 error in the input, 2 usage error, 3 does not fit, 4 no CUDA (measured
 * mode without a usable CUDA runtime, driver or device). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "membudget/membudget.h"

static const char USAGE[] =
  "usage: membudget <command> [options]\n"
  "\n"
  "Predict the GPU memory of one training step from an ONNX graph.\n"
  "\n"
  "commands:\n"
  "  info MODEL.onnx [--json] [--freeze GLOB]... [--trainable GLOB]...\n"
  "      opset, inputs and outputs, parameters/embeddings/buffers/constants by dtype,\n"
  "      embedding tables, the largest initializers and the op types used.\n"
  "  shapes MODEL.onnx [--batch N] [--batch-dim NAME] [--dim NAME=VALUE]...\n"
  "         [--per-sample DIM=COUNT,...] [--graph-sizes CSV] [--input-data DIR] [--json]\n"
  "      dtype, shape and bytes of every tensor at the given dim values. --input-data binds\n"
  "      the graph inputs to DIR/input_0.pb, input_1.pb, ... (ONNX test-data layout).\n"
  "      --batch sets the batch dim: the symbolic dim on axis 0 of the inputs unless\n"
  "      --batch-dim names it; with fully static inputs, axis 0 (and a note says so).\n"
  "      A data-dependent size (NonZero, Unique, a Loop's trip count, ...) is bounded\n"
  "      with --dim TENSOR=N, named after the node's first output (the error says which);\n"
  "      a NonZero over a bool mask and PyG's batch.max() + 1 are bounded by default, and\n"
  "      each bound taken is printed (\"assumed\").\n"
  "  estimate MODEL.onnx [--gpu NAME | --device-memory SIZE] [--batch N]\n"
  "           [--optimizer NAME] [--precision fp32|amp-fp16|amp-bf16|fp16|bf16]\n"
  "           [--attention auto|fused|eager] [--loss auto|ce|mse|none]\n"
  "           [--loss-dtype auto|fp32] [--ema]\n"
  "           [--freeze GLOB]... [--trainable GLOB]... [--checkpoint GLOB]...\n"
  "           [--teacher T.onnx [--teacher-offload]] [--dim NAME=VALUE]...\n"
  "           [--utilization 0.9] [--margin auto|F] [--batch-min N] [--batch-max N]\n"
  "           [--multiple-of N]\n"
  "           [--grad-accumulation N] [--master-weights] [--context SIZE]\n"
  "           [--reserved allocator|allowance] [--alloc-conf CONF]\n"
  "           [--fragmentation F] [--cublas-workspace SIZE] [--cublaslt-workspace SIZE]\n"
  "           [--cudnn-workspace SIZE|auto] [--cuda-version X.Y] [--driver-version N]\n"
  "           [--module-loading lazy|eager] [--rounding N]\n"
  "           [--backend cuda|cpu] [--foreach 0|1] [--grad-sum inplace|copy]\n"
  "           [--mode static|measured] [--cuda-device N] [--json [--trace]]\n"
  "           [--per-sample DIM=COUNT,...] [--batch-unit WORD] [--graph-sizes CSV]\n"
  "           [--graph-quantile Q] [--graph-batches K] [--timeline STEP.svg]\n"
  "           [--by-module [--depth N]] [--top N] [--advise | --no-advise]\n"
  "           [--advise-trainable GLOB]\n"
  "           [--eval-batch N|train [--ema-swap] [--eval-keep-outputs K]]\n"
  "           [--zero-grad none|zero|none-at-start] [--teacher-cache N]\n"
  "           [--world-size N --strategy ddp|fsdp|zero1|zero2|zero3\n"
  "            [--gradient-as-bucket-view] [--bucket-cap-mb N] [--fsdp-wrap GLOB]...\n"
  "            [--fsdp-sharding S] [--fsdp-version 1|2] [--fsdp-reshard-root 0|1]\n"
  "            [--fsdp-wrap-class NAME,...] [--fsdp-backward-prefetch pre|post|none]\n"
  "            [--fsdp-forward-prefetch 0|1] [--fsdp-limit-all-gathers 0|1]\n"
  "            [--fsdp-param-dtype D] [--fsdp-reduce-dtype D] [--fsdp-buffer-dtype D]\n"
  "            [--reduce-bucket-size N] [--overlap-comm 0|1] [--offload optimizer|params]\n"
  "            [--stage3-prefetch-bucket-size N] [--stage3-max-live-parameters N]\n"
  "            [--stage3-max-reuse-distance N] [--allgather-bucket-size N]\n"
  "            [--contiguous-gradients 0|1]]\n"
  "      simulates one training step (forward, loss, backward, optimizer step) and\n"
  "      prints where the memory goes. Without --batch it solves for the largest batch\n"
  "      size whose device peak fits utilization x device memory (exit 3 if even the\n"
  "      minimum does not fit); with --batch it reports that batch (exit 3 if it does\n"
  "      not fit). Optimizers: sgd, sgd-momentum, adam, adamw, adam-amsgrad,\n"
  "      adamw-amsgrad, adamw-8bit, adafactor, lion, rmsprop, adagrad. --checkpoint\n"
  "      globs match PyTorch module paths (e.g. 'model.layers.*'). SIZE: 80GiB, 24GB.\n"
  "      --mode measured replays the step on the CUDA device and solves against its\n"
  "      free memory now (device memory and GPU from the device unless given).\n"
  "      Reserved memory comes from a model of PyTorch's caching allocator, configured\n"
  "      by --alloc-conf (PYTORCH_CUDA_ALLOC_CONF syntax); --reserved allowance (or\n"
  "      --fragmentation F) uses allocated / (1 - F) instead.\n"
  "      Batches of graphs: --per-sample nodes=37,edges=120 makes those dims grow with\n"
  "      the batch, which then counts graphs; --graph-sizes CSV (a header naming the\n"
  "      dims, a row per graph) budgets for the worst batch of G graphs (each dim's G\n"
  "      largest values summed), --graph-quantile Q for that quantile of random batches.\n"
  "      --by-module prints the modules as a tree (parameters, what each keeps for\n"
  "      backward, its share of the peak; --depth N cuts it), --top N the largest\n"
  "      tensors alive at the peak. When the budget does not fit, or a given batch is\n"
  "      within 10% of the usable memory, \"what would make it fit\" lists changes, each\n"
  "      simulated (--advise: always; --no-advise: never).\n"
  "      --timeline draws the step's live memory by category, phases and peak as SVG.\n"
  "      --eval-batch adds an evaluation after each step (no grad, eval mode, at its own\n"
  "      batch; --ema-swap: diffusers' EMAModel.store + copy_to), reported beside the\n"
  "      step; the solved training batch fits both. --teacher-cache N keeps N batches\n"
  "      of teacher outputs on the device.\n"
  "      --world-size N with a --strategy budgets one rank at its own batch size\n"
  "      (docs/distributed.md); --offload reports what moves to host memory.\n"
  "  sweep MODEL.onnx (--batch LOW..HIGH | --dim NAME=LOW..HIGH) [--points N]\n"
  "        [--batch N] [estimate's setup options] [--json] [--svg SWEEP.svg]\n"
  "      the allocated, reserved and device peaks at each swept value: the powers of\n"
  "      two in the range and both ends (--points N: N values on a log scale; or a\n"
  "      list 1,8,64), with a device also the solved batch size. A dim sweep runs at\n"
  "      --batch N, or solves the batch size at each value. --svg draws it.\n"
  "  measure MODEL.onnx [--batch N[,M...]]... [estimate's setup options] [--json]\n"
  "      the CUDA device (name, memory, measured context and library handles) and the\n"
  "      step replayed on it at each batch size (default 1 and 8) beside the static\n"
  "      figures. The CUDA libraries are loaded at run time; MEMBUDGET_CUDA_RUNTIME,\n"
  "      MEMBUDGET_CUDA_DRIVER, MEMBUDGET_NVML, MEMBUDGET_CUBLAS, MEMBUDGET_CUBLASLT,\n"
  "      MEMBUDGET_CUDNN name them (a path; empty leaves an optional one out).\n"
  "  alloc-replay SNAPSHOT [--alloc-conf CONF] [--gpu NAME | --device-memory SIZE]\n"
  "               [--context SIZE] [--json]\n"
  "      replays a request stream PyTorch recorded (torch.cuda.memory._snapshot() as\n"
  "      _dump_snapshot's pickle, or as JSON) through the allocator model: the segments it\n"
  "      makes, the reserved peak, and how they compare with PyTorch's own segment events.\n"
  "  alloc-diff SNAPSHOT MODEL.onnx --batch N [estimate's setup options] [--json]\n"
  "      the recorded step's requests (the snapshot's, between its last two optimizer\n"
  "      steps) lined up with the simulated step's at that batch: matched, sizes that\n"
  "      differ, missing from the estimate or extra in it, lifetimes that differ, in step\n"
  "      order and summed by op and module.\n"
  "  gpus\n"
  "      the built-in GPU table for --gpu.\n"
  "  ops\n"
  "      the supported op types with the opset version each entry starts at.\n"
  "\n"
  "options:\n"
  "  --json            machine-readable output (raw byte integers, schema_version)\n"
  "  --freeze GLOB     parameters whose names match do not train (repeatable)\n"
  "  --trainable GLOB  parameters whose names match train; wins over --freeze\n"
  "  --limit NAME=N    raise or lower an input limit on every command that loads a model:\n"
  "                    file_bytes, nodes, tensors, subgraph_depth, rank, attr_bytes,\n"
  "                    string_bytes, unroll (docs/limits.md; repeatable)\n"
  "  --version         print the version and exit\n"
  "  --help, -h        print this help and exit\n"
  "\n"
  "exit codes: 0 ok, 1 error in the input, 2 usage error, 3 does not fit,\n"
  "            4 no CUDA (measured mode: no CUDA runtime, driver or device)\n";

int mb_cli_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("membudget: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\nrun 'membudget --help' for usage\n", stderr);
  va_end(ap);
  return MB_EXIT_USAGE;
}

int main(int argc, char **argv) {
  /* Refuse to run against a library of another major version (zstd's checkLibVersion). */
  if (mb_version_number() / 10000 != MB_VERSION_MAJOR) {
    fprintf(stderr, "membudget: library version %s does not match this program (%s)\n",
            mb_version_string(), MB_VERSION_STRING);
    return MB_EXIT_INPUT;
  }
  if (argc < 2) return mb_cli_usage_error("no command given");
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(USAGE, stdout);
    return MB_EXIT_OK;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("membudget %s (library %s, cuda %s)\n", MB_VERSION_STRING, mb_version_string(),
           (mb_features() & MB_FEATURE_CUDA) ? "yes" : "no");
    return MB_EXIT_OK;
  }
  if (!strcmp(cmd, "info")) return mb_cmd_info(argc - 1, argv + 1);
  if (!strcmp(cmd, "shapes")) return mb_cmd_shapes(argc - 1, argv + 1);
  if (!strcmp(cmd, "ops")) return mb_cmd_ops(argc - 1, argv + 1);
  if (!strcmp(cmd, "estimate")) return mb_cmd_estimate(argc - 1, argv + 1);
  if (!strcmp(cmd, "gpus")) return mb_cmd_gpus(argc - 1, argv + 1);
  if (!strcmp(cmd, "measure")) return mb_cmd_measure(argc - 1, argv + 1);
  if (!strcmp(cmd, "alloc-replay")) return mb_cmd_alloc_replay(argc - 1, argv + 1);
  if (!strcmp(cmd, "alloc-diff")) return mb_cmd_alloc_diff(argc - 1, argv + 1);
  if (!strcmp(cmd, "sweep")) return mb_cmd_sweep(argc - 1, argv + 1);
  return mb_cli_usage_error("unknown command '%s'", cmd);
}
