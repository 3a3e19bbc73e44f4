"""Curiosity from a learned dynamics model (seed 000 §5.3, seed 004 §4.2): its surprise at a transition.

Count-based novelty is elsewhere (`core.exploration.novelty_bonus`, the reward's `novel` term).
The learner fits a `DynamicsCuriosity` beside θ on its examples' (observation, action, next observation)
transitions and ships its weights with θ (`core.reward.dynamics.DynamicsWeights`, numpy only): search adds
`search.curiosity_weight` × its surprise to the edge of a stepped child (core/search/model.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from evoskill.core.reward.dynamics import DynamicsWeights, Transition, hashed_features, transition_features


def dynamics_batch(transitions: Sequence[Transition], state_dim: int, action_dim: int | None = None) -> DynamicsBatch:
    """`transitions` as the forward model's training batch."""
    states, actions, next_states = transition_features(transitions, state_dim, action_dim)
    return DynamicsBatch(torch.from_numpy(states), torch.from_numpy(actions), torch.from_numpy(next_states))


class DynamicsBatch(NamedTuple):
    """Feature vectors, one row per transition: state, action -> next state."""

    states: torch.Tensor
    actions: torch.Tensor
    next_states: torch.Tensor


class ForwardModel(nn.Module):
    """A tiny MLP predicting next-state features from state and action features."""

    def __init__(self, state_dim: int, action_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(state_dim + action_dim, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, state_dim),
        )

    def forward(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        prediction: torch.Tensor = self.net(torch.cat([states, actions], dim=-1))
        return prediction


class DynamicsCuriosity:
    """Surprise of a forward model: bonus = tanh(‖pred − next‖² / (‖next‖² + eps)), in [0, 1).

    The error is relative to the target's size so the bonus does not depend on the feature scale, and it
    falls as the model learns a transition (familiar) while staying high for unseen ones (novel).
    """

    def __init__(
        self, state_dim: int, action_dim: int, *, hidden: int = 64, lr: float = 1e-3, seed: int = 0
    ) -> None:
        self.state_dim, self.action_dim, self.hidden, self.lr = state_dim, action_dim, hidden, lr
        with torch.random.fork_rng(devices=[]):  # seeded init without touching the caller's RNG
            torch.manual_seed(seed)
            self.model = ForwardModel(state_dim, action_dim, hidden)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

    def prediction_error(self, batch: DynamicsBatch) -> torch.Tensor:
        """Relative squared error per row (differentiable)."""
        states, actions, next_states = (torch.atleast_2d(t).float() for t in batch)
        squared = (self.model(states, actions) - next_states).pow(2).sum(dim=-1)
        return squared / (next_states.pow(2).sum(dim=-1) + 1e-6)

    def bonus(self, batch: DynamicsBatch) -> torch.Tensor:
        with torch.no_grad():
            return torch.tanh(self.prediction_error(batch))

    def update(self, batch: DynamicsBatch) -> float:
        """One Adam step on the mean relative error; returns the loss before the step."""
        loss = self.prediction_error(batch).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def state_dict(self) -> dict[str, Any]:
        return {
            "dims": (self.state_dim, self.action_dim, self.hidden),
            "lr": self.lr,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def weights(self) -> DynamicsWeights:
        """The forward model's weights as numpy arrays, for `DynamicsWeights.bonus` (no torch needed)."""
        linears = [m for m in self.model.net if isinstance(m, nn.Linear)]
        return DynamicsWeights(self.state_dim, self.action_dim,
                               tuple((m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
                                     for m in linears))

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> DynamicsCuriosity:
        state_dim, action_dim, hidden = state["dims"]
        curiosity = cls(state_dim, action_dim, hidden=hidden, lr=state["lr"])
        curiosity.model.load_state_dict(state["model"])
        curiosity.optimizer.load_state_dict(state["optimizer"])
        return curiosity


__all__ = ["DynamicsBatch", "DynamicsCuriosity", "DynamicsWeights", "ForwardModel", "Transition",
           "dynamics_batch", "hashed_features", "transition_features"]
