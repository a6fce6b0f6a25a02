"""What an estimate reports beside the budget when asked: the library's module tree
(``by_module=True``), the largest tensors alive at the peak (``top=N``) and the simulated
advice (``advise=True`` / ``"auto"``). Each is read from the members of `membudget estimate
--json` of the same name ("modules", "top", "advice"; docs/cli.md), so the CLI, C callers and
Python see the same numbers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Module:
    """One module of the tree (mb_module_info). Figures are subtree totals: the module and its
    submodules. ``path`` is the dotted PyTorch module path ("layer1.0.conv1"), "" for a root,
    None for the "no module" entry (optimizer states, inputs, workspaces, the loss)."""

    path: Optional[str]
    model: Optional[str]          # "model", "teacher", or None for the "no module" entry
    parent: Optional[int]         # index of the parent in Budget.module_tree; None for a root
    depth: int                    # 0 for a root
    nodes: int                    # ONNX nodes that run in it
    parameters: int               # parameter and embedding bytes on the device
    kept: int                     # activation bytes live at the end of forward its nodes made
    at_peak: int                  # bytes live at the allocated peak that belong to it
    at_peak_categories: Mapping[str, int]  # the same by category (non-zero ones)

    @property
    def name(self) -> Optional[str]:
        """The path as Budget.modules() names it: "teacher:" before the teacher's modules."""
        if self.path is None:
            return None
        return "teacher:" + self.path if self.model == "teacher" else self.path


@dataclass(frozen=True)
class PeakTensor:
    """A tensor alive at the allocated peak (mb_peak_tensor), largest first."""

    tensor: str
    bytes: int
    category: str
    phase: str                    # the phase that allocated it
    model: str                    # "model" or "teacher"
    node: Optional[str]           # the ONNX node that allocated it
    op_type: Optional[str]
    aten: Optional[str]           # the aten op a dynamo export recorded for it
    module: Optional[str]         # the module it belongs to (None: no module)


@dataclass(frozen=True)
class Advice:
    """One line of "what would make it fit" (mb_advice_line): a change to the setup, simulated
    for real. ``flags`` are `membudget estimate`'s flags for it; ``device_peak`` is the budget
    with the change at ``batch_size`` (the budget's own batch, or gradient accumulation's
    micro-batch), ``solved_batch`` the largest batch that fits with the change (0: none; None
    without a device memory). ``what_if`` marks a change of what trains (freezing)."""

    kind: str      # precision, checkpoint, optimizer, attention, grad_accumulation, teacher_offload, freeze, shard
    title: str
    note: str
    what_if: bool
    flags: Tuple[str, ...]
    command: str                  # the flags, shell-quoted
    batch_size: int
    grad_accumulation: int
    allocated_peak: int
    device_peak: int
    saves: int                    # the budget's device peak - device_peak
    fits: Optional[bool]
    available: int
    solved_batch: Optional[int]
    solved_device_peak: Optional[int]

    @property
    def effective_batch_size(self) -> int:
        return self.batch_size * self.grad_accumulation


def modules_from(doc: Mapping[str, Any]) -> Optional[Tuple[Module, ...]]:
    section = doc.get("modules")
    if section is None:
        return None
    return tuple(Module(m["path"], m["model"], m["parent"], m["depth"], m["nodes"], m["parameters"], m["kept"],
                        m["at_peak"], dict(m["at_peak_categories"])) for m in section["tree"])


def top_from(doc: Mapping[str, Any]) -> Optional[Tuple[PeakTensor, ...]]:
    if "top" not in doc:
        return None
    return tuple(PeakTensor(t["tensor"], t["bytes"], t["category"], t["phase"], t["model"], t["node"],
                            t["op_type"], t["aten"], t["module"]) for t in doc["top"])


def advice_from(doc: Mapping[str, Any]) -> Optional[Tuple[Advice, ...]]:
    section = doc.get("advice")
    if section is None:
        return None
    return tuple(Advice(a["kind"], a["title"], a["note"], a["what_if"], tuple(a["flags"]), a["command"],
                        a["batch_size"], a["grad_accumulation"], a["allocated_peak"], a["device_peak"], a["saves"],
                        a["fits"], a["available"], a["solved_batch"], a["solved_device_peak"])
                 for a in section["lines"])


def advice_reason(doc: Mapping[str, Any]) -> Optional[str]:
    section: Dict[str, Any] = doc.get("advice") or {}
    return section.get("reason")
