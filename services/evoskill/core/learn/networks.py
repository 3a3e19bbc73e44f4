"""θ: skill embeddings, the meta-policy over (state, candidate action) pairs, and the value network.

Shapes (B states, A candidate slots, D text-feature dim, K skill dim, H hidden):

    forward(state_feat[B, 2D], action_feat[B, A, D], template_ids[B, A], mask[B, A]) -> (logits[B, A], value[B])

- Skills (seed 000 §3.1): one learnable K-vector per action template. `SkillVocab` hands out rows
  in order of first appearance up to `max_skills`; row 0 is the unknown skill, a fixed zero vector
  (padding_idx) used for padding, for templates seen first at serving time and for any overflow, so
  such an action is scored from its text alone. Preallocating the table keeps the optimiser state
  and the ONNX graph fixed while the vocabulary grows.
- Policy: an MLP over [s, a, s*a] per pair (DRRN-style, the text of the action matters, not only its
  slot), plus the seed's skill prior: the dot product of a state query and the action's skill
  embedding. Padding gets a large negative logit, so a softmax over the row only covers real
  candidates; the number of candidates varies per state, so A is a dynamic axis.
- Value: an MLP on the state encoding, unbounded (a linear output), because its target is the
  discounted sum of shaped rewards, which is not confined to [-1, 1]; the planner min-max
  normalises Q anyway.

`reader.ReaderNet` is the other encoder (`NetConfig.encoder = "reader"`): the same skills, heads and
outputs over token ids, where each candidate's tokens attend to the state's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import nn

UNK = 0
MASKED_LOGIT = -1e9  # finite: a row with no real candidate still softmaxes without NaN


@dataclass(frozen=True)
class NetConfig:
    feature_dim: int  # D, the featuriser's dim (mlp); the token table's width (reader)
    hidden: int = 128
    skill_dim: int = 32
    max_skills: int = 1024  # rows of the skill table, row 0 included
    encoder: str = "mlp"  # "mlp": PolicyValueNet over text vectors; "reader": reader.ReaderNet over tokens
    vocab_size: int = 0  # reader: rows of the token table
    width: int = 64  # reader: token representation width
    layers: int = 0  # reader: cross-attention layers (candidate tokens -> all state tokens)
    heads: int = 2  # reader: attention heads
    train_tokens: bool = False  # reader: fine-tune the token table (frozen: unseen words stay comparable)
    room_marks: bool = False  # the candidates θ reads carry the rooms they lead to (core/rooms.py)
    recent_actions: int = 0  # θ reads the state with this many last actions taken (core/state_text.py)
    scored_marks: bool = False  # the candidates θ reads are marked where their kind raised the score before

    @property
    def state_dim(self) -> int:
        return 2 * self.feature_dim  # goal features, then observation features

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NetConfig:
        """A recorded config; fields added since it was written take their defaults."""
        return cls(**data)


class SkillVocab:
    """Template -> row of the skill table; grows on `add` until the table is full, then maps to UNK."""

    def __init__(self, max_skills: int, templates: Iterable[str] = ()) -> None:
        self.max_skills = max_skills
        self._ids: dict[str, int] = {}
        for t in templates:
            self.add(t)

    def add(self, template: str) -> int:
        """The row of `template`, giving it the next free one if it is new (training side)."""
        got = self._ids.get(template)
        if got is not None:
            return got
        if not template or len(self._ids) + 1 >= self.max_skills:
            return UNK
        self._ids[template] = len(self._ids) + 1
        return self._ids[template]

    def get(self, template: str) -> int:
        """The row of `template`, UNK if it was never trained (serving side: never grows)."""
        return self._ids.get(template, UNK)

    def __len__(self) -> int:
        return len(self._ids) + 1  # rows in use, UNK included

    def __contains__(self, template: object) -> bool:
        return template in self._ids

    @property
    def templates(self) -> list[str]:
        return list(self._ids)  # in row order, starting at row 1

    def to_dict(self) -> dict[str, Any]:
        return {"max_skills": self.max_skills, "templates": self.templates}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SkillVocab:
        return cls(int(data["max_skills"]), [str(t) for t in data["templates"]])


def _mlp(inp: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())


class PolicyValueNet(nn.Module):
    # The exported graph's inputs (data.PolicyInputs' fields), and the axes that vary per call.
    INPUTS = ("state_feat", "action_feat", "template_ids", "mask")
    DYNAMIC_AXES: ClassVar[dict[str, dict[int, str]]] = {
        "state_feat": {0: "batch"},
        "action_feat": {0: "batch", 1: "candidates"},
        "template_ids": {0: "batch", 1: "candidates"},
        "mask": {0: "batch", 1: "candidates"},
    }

    def __init__(self, config: NetConfig) -> None:
        super().__init__()
        self.config = config
        h, k = config.hidden, config.skill_dim
        self.skills = nn.Embedding(config.max_skills, k, padding_idx=UNK)
        nn.init.normal_(self.skills.weight, std=0.1)
        with torch.no_grad():
            self.skills.weight[UNK].zero_()
        self.state_encoder = _mlp(config.state_dim, h)
        self.action_encoder = _mlp(config.feature_dim + k, h)
        # Linear([s, a, s*a]) written as a sum of three projections: broadcasting s over the A axis
        # instead of expanding it keeps the candidate axis dynamic in the ONNX graph.
        self.pair_state = nn.Linear(h, h)
        self.pair_action = nn.Linear(h, h, bias=False)
        self.pair_product = nn.Linear(h, h, bias=False)
        self.pair_out = nn.Linear(h, 1)
        self.skill_query = nn.Linear(h, k)
        self.value_head = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))

    def forward(
        self, state_feat: torch.Tensor, action_feat: torch.Tensor, template_ids: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.state_encoder(state_feat)  # [B, H]
        skill = self.skills(template_ids)  # [B, A, K]
        a = self.action_encoder(torch.cat([action_feat, skill], dim=-1))  # [B, A, H]
        s1 = s.unsqueeze(1)  # [B, 1, H]
        pair = torch.relu(self.pair_state(s1) + self.pair_action(a) + self.pair_product(s1 * a))
        skill_prior = (self.skill_query(s).unsqueeze(1) * skill).sum(-1)  # [B, A]
        logits = self.pair_out(pair).squeeze(-1) + skill_prior
        logits = logits.masked_fill(~mask, MASKED_LOGIT)
        value = self.value_head(s).squeeze(-1)
        return logits, value

    def example_inputs(self, b: int = 2, a: int = 3) -> tuple[torch.Tensor, ...]:
        """Inputs of the given shape, to trace the graph for export."""
        cfg = self.config
        return (torch.zeros(b, cfg.state_dim), torch.zeros(b, a, cfg.feature_dim),
                torch.zeros(b, a, dtype=torch.long), torch.ones(b, a, dtype=torch.bool))
