"""Can DeepSpeed ZeRO train on the CPU here? A two-layer MLP, 3 steps of ZeRO stage N (argv[1]).

    DS_ACCELERATOR=cpu bench/truth/.venv2/bin/python -m torch.distributed.run --nproc_per_node 2 \\
        bench/deepspeed/ds_cpu_smoke.py 3

deepspeed 0.19.8 with DS_ACCELERATOR=cpu: it JIT-builds its shm comm op (seconds) and, for the
optimizer, its CPU FusedAdam (ninja; over 90 s on this loaded 2-core machine): "torch_adam": True
uses torch.optim.AdamW instead. Stages 2 and 3 ran on 1 and 2 ranks (docs/deepspeed.md)."""
import os, sys, torch, deepspeed
import torch.distributed as dist
stage = int(sys.argv[1]) if len(sys.argv) > 1 else 2
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
       "zero_optimization": {"stage": stage}, "bf16": {"enabled": False}}
engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg,
                                         dist_init_required=True)
print("initialized", flush=True)
x = torch.randn(4, 64); y = torch.randint(0, 10, (4,))
for i in range(3):
    loss = torch.nn.functional.cross_entropy(engine(x), y)
    engine.backward(loss); engine.step()
print("rank", dist.get_rank(), "ok", float(loss))
