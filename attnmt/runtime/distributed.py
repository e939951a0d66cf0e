"""Multi-process training with `torchrun`: gloo on CPUs, NCCL on GPUs.

`torchrun --nproc_per_node N -m attnmt train CONFIG` sets RANK, WORLD_SIZE and LOCAL_RANK; a plain
`attnmt train` is a world of one and never touches torch.distributed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Only the main process logs, validates and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def sum(self, value: float) -> float:
        """The sum of a number over all processes."""
        if not self.distributed:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t)
        return float(t.item())

    def agree(self, flag: bool) -> bool:
        """True on every process when the main process says so (stopping must be unanimous)."""
        if not self.distributed:
            return flag
        t = torch.tensor([1 if flag else 0])
        dist.broadcast(t, src=0)
        return bool(t.item())


def init_world(device: str) -> World:
    """Join the process group that torchrun describes in the environment, if any."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
    return World(rank, size, local_rank)


def close_world(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()
