"""A training script that picks its batch size before building the DataLoader.

membudget predicts the GPU memory of one training step from the model's graph, so the batch
size is known before any GPU memory is touched: no trial-and-error, no OOM an hour in.

    python pick_batch_size.py --gpu a100-40gb          # size for a GPU from `membudget gpus`
    python pick_batch_size.py                          # on a CUDA machine: size for its GPU

Needs PyTorch and the membudget package (pip install ./bindings/python).
"""
from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import membudget
import membudget.torch

IMAGE = (3, 64, 64)
CLASSES = 10


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * (IMAGE[1] // 4) * (IMAGE[2] // 4), CLASSES))


def device_arguments(args: argparse.Namespace) -> dict:
    """Which device to size for: a named GPU, or the memory of the CUDA device we will use."""
    if args.gpu:
        return {"gpu": args.gpu}
    if torch.cuda.is_available():
        return {"device_memory": torch.cuda.get_device_properties(0).total_memory}
    raise SystemExit("no CUDA device here: name the GPU to size for with --gpu (see membudget.gpus())")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", help="size for this GPU (a name from membudget.gpus())")
    p.add_argument("--utilization", type=float, default=0.85, help="target fraction of device memory")
    p.add_argument("--max-batch", type=int, default=1024)
    p.add_argument("--steps", type=int, default=3, help="training steps to run (a demo)")
    p.add_argument("--samples", type=int, default=4096, help="size of the synthetic data set")
    args = p.parse_args()

    model = build_model()
    optimizer_name = "adamw"

    # 1. The batch size, from the graph. The model is exported to ONNX in memory once; the
    #    example batch of 2 only drives the export (the batch axis is exported as a dynamic dim).
    with membudget.torch.load(model, torch.randn(2, *IMAGE)) as graph:
        try:
            batch_size = membudget.compute_batch_size(
                graph, optimizer=optimizer_name, target_utilization=args.utilization,
                min_batch_size=8, max_batch_size=args.max_batch, multiple_of=8, **device_arguments(args))
        except membudget.DoesNotFitError as e:
            print(f"this model does not fit: {e}")
            print(e.budget)  # where the memory goes at the smallest batch
            raise SystemExit(3)
        budget = membudget.estimate(graph, batch=batch_size, optimizer=optimizer_name,
                                    utilization=args.utilization, **device_arguments(args))
    print(f"batch size {batch_size}: {budget}")

    # 2. Only now the DataLoader, with that batch size.
    data = TensorDataset(torch.randn(args.samples, *IMAGE), torch.randint(0, CLASSES, (args.samples,)))
    loader = DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=True)

    # 3. Train as usual.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        if step == args.steps:
            break
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
    if device == "cuda":
        peak = torch.cuda.max_memory_reserved()
        print(f"reserved peak {membudget.format_bytes(peak)} (predicted {membudget.format_bytes(budget.reserved_peak)})")


if __name__ == "__main__":
    main()
