"""A small click-through-rate model and its synthetic data, for training through p4reduce.

Why this model: a recommendation model's gradient is *block-sparse*. The embedding table is
most of the parameters, and a batch touches only the rows of the ids it contains; with
`nn.Embedding(sparse=False)` the gradient is a dense tensor whose untouched rows are exact
zeros -- the zero blocks p4reduce never sends. The MLP on top is small and dense.

The data is generated, with a fixed seed, by a hidden "teacher": every id has a latent
weight, a few field pairs interact, and a click is a Bernoulli draw of the sigmoid of the
sum. Ids follow a power law (a few popular items, a long tail), as real click logs do,
so ranks' batches overlap on popular rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class Config:
    rows_per_field: int = 6_250  # embedding rows of one categorical field
    fields: int = 8  # categorical fields per example
    dim: int = 32  # embedding width (two rows per 64-value block)
    hidden: int = 64  # MLP width
    batch: int = 128  # examples per rank per step
    steps: int = 300
    lr: float = 0.005  # Adam
    seed: int = 2024  # data, teacher and initial parameters
    zipf: float = 1.5  # power-law exponent of id popularity

    @property
    def rows(self) -> int:
        return self.rows_per_field * self.fields

    def as_dict(self) -> dict:
        return asdict(self)


class ClickModel(nn.Module):
    """Embedding lookup of every field, concatenated, through an MLP to one logit."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.embedding = nn.Embedding(cfg.rows, cfg.dim)  # dense gradients (sparse=False)
        nn.init.normal_(self.embedding.weight, std=0.05)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.fields * cfg.dim, cfg.hidden),
            nn.ReLU(),
            nn.Linear(cfg.hidden, cfg.hidden // 2),
            nn.ReLU(),
            nn.Linear(cfg.hidden // 2, 1),
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.embedding(ids).flatten(1)).squeeze(1)


def build_model(cfg: Config) -> ClickModel:
    """The same initial parameters in every process and run (seeded)."""
    torch.manual_seed(cfg.seed)
    return ClickModel(cfg)


class ClickData:
    """Batches of (ids, clicks) for one rank: the teacher is shared (seeded by cfg.seed),
    the examples are the rank's own (seeded by cfg.seed and the rank), so both runs of a
    comparison see exactly the same data."""

    def __init__(self, cfg: Config, rank: int):
        self.cfg = cfg
        teacher = np.random.default_rng(cfg.seed)
        self.weight = teacher.normal(0.0, 1.0, cfg.rows)
        # one interaction: fields 0 and 1 through 4-dimensional latent vectors
        self.latent = teacher.normal(0.0, 1.0, (cfg.rows, 4))
        self.offsets = np.arange(cfg.fields) * cfg.rows_per_field
        # popularity rank -> id, a different permutation per field
        self.perm = np.stack([teacher.permutation(cfg.rows_per_field) for _ in range(cfg.fields)])
        self.rng = np.random.default_rng([cfg.seed, 1 + rank])

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.cfg
        pop = self.rng.zipf(cfg.zipf, (cfg.batch, cfg.fields)) - 1
        pop %= cfg.rows_per_field
        ids = self.perm[np.arange(cfg.fields), pop] + self.offsets
        logit = 2.0 * self.weight[ids].sum(1) / np.sqrt(cfg.fields)
        logit += (self.latent[ids[:, 0]] * self.latent[ids[:, 1]]).sum(1) / 2.0
        click = self.rng.random(cfg.batch) < 1.0 / (1.0 + np.exp(-logit))
        return torch.from_numpy(ids), torch.from_numpy(click.astype(np.float32))
