"""The outer-loop update of θ, top to bottom (seed 000 §3.3, seed 004 §3).

One update:

1. draw a batch from replay: round(batch_size · online_fraction) fresh steps, the rest from the
   offline library, each drawn ∝ priority^α and weighted by its importance weight;
2. featurise states and candidate actions (cached text features + skill rows of their templates);
3. forward the policy/value network once;
4. loss = CE(π_search, p_θ)                      AlphaZero distillation (× distill_coef where searched)
        + value_coef       · Huber(V_θ(s), G)       value regression to the discounted return
        + pg_coef          · -Σ_a p_θ(a)(Q - V)    policy gradient with the search's advantages
        + self_imitation_coef · -log p_θ(a) (G - V)⁺  self-imitation of the agent's own better-than-expected steps
        - entropy_coef     · H(p_θ)                 entropy bonus against early collapse
        + contrastive_coef · InfoNCE(skills)        co-used skills of successful episodes together
   On a demonstration step (one-hot visits on the demonstrated action, no Q) this is behaviour cloning,
   -log p_θ(a_demo), with V_θ regressed to the demonstration's own discounted return (the same shaped
   rewards, on the same scale, as a searched step's); the policy-gradient term is zero there.
5. Adam step after clipping the gradient norm to grad_clip; a batch whose loss or gradient is not finite is
   refused (no step, no priority change, counted in `skipped_steps`);
6. give the sampled steps their new priority |G - V_θ(s)|.

Beside θ, each `train` call fits the dynamics model (`core.reward.curiosity.DynamicsCuriosity`) with
`dynamics_steps` Adam steps on the (observation, action, next observation) transitions of the steps it drew;
its weights travel in θ's file (`export`), for search's curiosity bonus (`search.curiosity_weight`).

The coefficients, lr, batch size and clip come from `LearnerSettings`; the rest from `TrainConfig`.
"""

from __future__ import annotations

import copy
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch

from evoskill.core.learn.augment import rename_batch
from evoskill.core.learn.data import Example, TextEncoder, make_inputs
from evoskill.core.learn.export import export_policy
from evoskill.core.learn.losses import (
    advantages,
    contrastive_skill_loss,
    distillation_loss,
    entropy,
    policy_gradient_loss,
    self_imitation_loss,
    value_loss,
)
from evoskill.core.learn.networks import UNK, NetConfig, PolicyValueNet, SkillVocab
from evoskill.core.learn.reader import ReaderNet
from evoskill.core.learn.replay import MixedReplay
from evoskill.core.learn.tokens import TokenFeaturizer
from evoskill.core.reward.curiosity import DynamicsCuriosity, dynamics_batch
from evoskill.platform.config import LearnerSettings


@dataclass(frozen=True)
class TrainConfig:
    """Learner knobs that `LearnerSettings` does not carry."""

    gamma: float = 0.97  # discount of the returns; keep it equal to the search's gamma
    hidden: int = 128
    width: int = 64  # reader: token representation width
    layers: int = 0  # reader: cross-attention layers
    heads: int = 2  # reader: attention heads
    train_tokens: bool = False  # reader: fine-tune the token table
    skill_dim: int = 32
    max_skills: int = 1024
    max_candidates: int = 64  # per training state: searched and taken actions first, then a random rest
    contrastive_temperature: float = 0.1
    contrastive_negatives: int = 8
    baseline: Literal["search", "value"] = "search"  # V of A = Q - V: the search's root value, or V_θ
    seed: int = 0
    # The dynamics model fitted beside θ (search's curiosity): Adam steps per train call (0 = none), on at most
    # dynamics_batch of the call's distinct transitions, hashed-word features of dynamics_dim.
    dynamics_steps: int = 4
    dynamics_batch: int = 256
    dynamics_dim: int = 64
    dynamics_hidden: int = 64
    dynamics_lr: float = 3e-3


def _column(taken: int, keep: np.ndarray) -> int:
    """Where the executed action `taken` sits among the kept candidates; -1 if it is not kept."""
    hits = np.flatnonzero(keep == taken)
    return int(hits[0]) if taken >= 0 and len(hits) else -1


class Batch(NamedTuple):
    """A collated batch: network inputs and targets as tensors (B states, A candidate slots)."""

    inputs: tuple[torch.Tensor, ...]  # the network's inputs (data.PolicyInputs or tokens.TokenInputs)
    visit_probs: torch.Tensor  # [B, A]
    q_values: torch.Tensor  # [B, A]
    q_mask: torch.Tensor  # [B, A] bool
    root_value: torch.Tensor  # [B]; nan where the step was not searched
    taken: torch.Tensor  # [B] column of the executed action; -1 where it is not among the candidates
    returns: torch.Tensor  # [B]
    weights: torch.Tensor  # [B] importance weights
    anchors: torch.Tensor  # [P] skill rows of the contrastive pairs
    positives: torch.Tensor  # [P]
    negatives: torch.Tensor  # [P, M]

    @property
    def mask(self) -> torch.Tensor:
        return self.inputs[-1]  # [B, A] bool: a real candidate (the last input of either encoder)


class Learner:
    """θ (network + skill vocabulary), its optimiser, and the update step. The featuriser names the
    encoder: a `TokenFeaturizer` gets the reader, a vector featuriser the MLP."""

    def __init__(
        self,
        featurizer: TextEncoder,
        settings: LearnerSettings | None = None,
        config: TrainConfig | None = None,
        replay: MixedReplay | None = None,
    ) -> None:
        self.featurizer = featurizer
        self.settings = settings or LearnerSettings()
        self.config = config or TrainConfig()
        self.replay = replay
        self.rng = np.random.default_rng(self.config.seed)
        c = self.config
        reader: dict[str, Any] = {}
        if isinstance(featurizer, TokenFeaturizer):
            reader = {"encoder": "reader", "vocab_size": featurizer.vocab_size, "width": c.width, "layers": c.layers,
                      "heads": c.heads, "train_tokens": c.train_tokens}
        self.net_config = NetConfig(
            feature_dim=featurizer.dim, hidden=c.hidden, skill_dim=c.skill_dim, max_skills=c.max_skills,
            room_marks=self.settings.room_marks, recent_actions=self.settings.recent_actions,
            scored_marks=self.settings.scored_marks, **reader
        )
        self.net: PolicyValueNet | ReaderNet
        with torch.random.fork_rng():  # seeded init without touching the caller's global RNG
            torch.manual_seed(c.seed)
            if isinstance(featurizer, TokenFeaturizer):
                self.net = ReaderNet(self.net_config)
                self.net.set_token_table(featurizer.initial_table(c.seed))
            else:
                self.net = PolicyValueNet(self.net_config)
        self.vocab = SkillVocab(self.config.max_skills)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=self.settings.lr)
        self.dynamics = (DynamicsCuriosity(c.dynamics_dim, c.dynamics_dim, hidden=c.dynamics_hidden,
                                           lr=c.dynamics_lr, seed=c.seed) if c.dynamics_steps > 0 else None)
        # Demonstrated actions the environment did not list, by the times θ was trained on them: exported with θ
        # (the most frequent `learner.demonstrated_actions`), so the planner offers them (core/search/demonstrated.py).
        self.demonstrated: Counter[str] = Counter()
        self.steps = 0
        self.skipped_steps = 0  # updates refused for a non-finite loss or gradient
        self.version = 0

    # -- data -> tensors ------------------------------------------------------------------------

    def _keep(self, ex: Example) -> np.ndarray:
        """Indices of the candidates to train on: all if few, else searched/taken first, then random."""
        n, cap = len(ex.actions), self.config.max_candidates
        if n <= cap:
            return np.arange(n)
        important = ex.visit_probs + ex.q_mask
        if ex.taken >= 0:
            important[ex.taken] += 2.0
        must = np.flatnonzero(important > 0)
        must = must[np.argsort(-important[must], kind="stable")][:cap]
        free = np.ones(n, bool)
        free[must] = False
        rest = np.flatnonzero(free)  # what setdiff1d gave, sorted, without its sort: the same draws below
        extra = self.rng.choice(rest, size=min(cap - len(must), len(rest)), replace=False)
        return np.sort(np.concatenate([must, extra]))

    def collate(self, examples: Sequence[Example], weights: np.ndarray | None = None, rename: bool = False) -> Batch:
        """Tensors of `examples`; with `rename`, a `learner.rename_share` of them in a renamed world (augment.py)."""
        keeps = [self._keep(ex) for ex in examples]
        states = [ex.state(self.net_config.recent_actions) for ex in examples]
        rooms, scored = self.net_config.room_marks, self.net_config.scored_marks
        candidates = [ex.candidates(keep, rooms, scored) for ex, keep in zip(examples, keeps, strict=True)]
        if rename:
            columns = [_column(ex.taken, keep) for ex, keep in zip(examples, keeps, strict=True)]
            states, candidates = rename_batch(states, candidates, columns, self.settings.rename_share, self.rng)
        inputs = make_inputs(self.featurizer, self.vocab.add, states, candidates)
        b, a = inputs.mask.shape
        visit_probs = np.zeros((b, a), np.float32)
        q_values = np.zeros((b, a), np.float32)
        q_mask = np.zeros((b, a), bool)
        for row, (ex, keep) in enumerate(zip(examples, keeps, strict=True)):
            pi = ex.visit_probs[keep]
            visit_probs[row, : len(keep)] = pi / pi.sum() if pi.sum() > 0 else 1.0 / len(keep)
            q_values[row, : len(keep)] = ex.q_values[keep]
            q_mask[row, : len(keep)] = ex.q_mask[keep]

        # Contrastive pairs: the executed skill of a step of a successful episode and another skill
        # of that episode; negatives drawn uniformly from the known skills (row 0, UNK, excluded).
        pairs: list[tuple[int, int]] = []
        for ex in examples:
            anchor = ex.templates[ex.taken] if ex.taken >= 0 else ""
            others = [t for t in ex.skills if t != anchor]
            if anchor in ex.skills and others:
                pair = (self.vocab.add(anchor), self.vocab.add(others[int(self.rng.integers(len(others)))]))
                if UNK not in pair:
                    pairs.append(pair)
        m = self.config.contrastive_negatives
        # Two distinct known skills in a pair mean len(vocab) >= 3, so the draw below has a range.
        negatives = self.rng.integers(1, len(self.vocab), size=(len(pairs), m)) if pairs else np.zeros((0, m))

        return Batch(
            inputs=tuple(torch.from_numpy(x) for x in inputs),
            visit_probs=torch.from_numpy(visit_probs),
            q_values=torch.from_numpy(q_values),
            q_mask=torch.from_numpy(q_mask),
            root_value=torch.tensor([ex.root_value for ex in examples], dtype=torch.float32),
            taken=torch.tensor([_column(ex.taken, keep) for ex, keep in zip(examples, keeps, strict=True)],
                               dtype=torch.long),
            returns=torch.tensor([ex.ret for ex in examples], dtype=torch.float32),
            weights=torch.ones(b) if weights is None else torch.as_tensor(weights, dtype=torch.float32),
            anchors=torch.tensor([x for x, _ in pairs], dtype=torch.long),
            positives=torch.tensor([y for _, y in pairs], dtype=torch.long),
            negatives=torch.as_tensor(negatives, dtype=torch.long),
        )

    # -- the loss -------------------------------------------------------------------------------

    def losses(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Every loss term and the weighted total, plus V_θ(s) (for priorities)."""
        s, w = self.settings, batch.weights
        logits, value = self.net(*batch.inputs)
        searched = ~torch.isnan(batch.root_value)
        if self.config.baseline == "search":
            baseline = torch.where(searched, torch.nan_to_num(batch.root_value), value)
        else:
            baseline = value
        terms = {
            # Cloning a library step always counts fully; distill_coef weighs the search's own targets.
            "distill": distillation_loss(logits, batch.visit_probs, w,
                                         scale=torch.where(searched, s.distill_coef, 1.0)),
            "value": value_loss(value, batch.returns, w),
            "pg": policy_gradient_loss(logits, advantages(batch.q_values, baseline), batch.q_mask, w),
            "self_imitation": self_imitation_loss(logits, batch.taken, batch.returns, value, searched, w),
            "entropy": entropy(logits, w),
            "contrastive": contrastive_skill_loss(
                self.net.skills.weight,
                batch.anchors,
                batch.positives,
                batch.negatives,
                self.config.contrastive_temperature,
            ),
        }
        terms["loss"] = (
            terms["distill"]
            + s.self_imitation_coef * terms["self_imitation"]
            + s.value_coef * terms["value"]
            + s.pg_coef * terms["pg"]
            - s.entropy_coef * terms["entropy"]
            + s.contrastive_coef * terms["contrastive"]
        )
        return terms, value

    # -- the update -----------------------------------------------------------------------------

    def _step(self, batch: Batch) -> tuple[dict[str, float], np.ndarray]:
        self.net.train()
        terms, value = self.losses(batch)
        self.optimizer.zero_grad(set_to_none=True)
        terms["loss"].backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.settings.grad_clip)
        metrics = {k: float(v.detach()) for k, v in terms.items()}
        metrics["grad_norm"] = float(grad_norm)
        if not (np.isfinite(metrics["loss"]) and np.isfinite(metrics["grad_norm"])):
            # One bad number in a batch must never reach θ: Adam would spread it to every weight for good.
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped_steps += 1
            metrics["skipped"] = 1.0
            return metrics, np.zeros(len(batch.returns))
        self.optimizer.step()
        self.steps += 1
        surprise = (batch.returns - value.detach()).abs().numpy()
        return metrics, surprise

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step on `batch`; returns every loss term (before the step) and the grad norm."""
        return self._step(batch)[0]

    def train(self, steps: int, stop: threading.Event | None = None) -> dict[str, float]:
        """`steps` updates on batches from the replay (fewer if `stop` is set meanwhile); the mean of each metric
        over the updates made, their number as "steps" and the refused ones' as "skipped_steps" (each only when
        > 0; empty if no data)."""
        if self.replay is None:
            raise RuntimeError("train() samples from a replay; construct the Learner with one or call update()")
        totals: dict[str, float] = {}
        done = skipped = 0
        transitions: dict[tuple[str, ...], None] = {}  # distinct, in the order drawn
        for _ in range(steps):
            if stop is not None and stop.is_set():
                break
            sample = self.replay.sample(self.settings.batch_size)
            if not sample.examples:
                break
            metrics, surprise = self._step(self.collate(sample.examples, sample.weights, rename=True))
            if metrics.pop("skipped", 0.0):
                skipped += 1
                continue
            self.replay.update_priorities(sample.keys, surprise.tolist())
            transitions.update((ex.transition, None) for ex in sample.examples if len(ex.transition) == 3)
            self.demonstrated.update(ex.actions[ex.taken] for ex in sample.examples if ex.unlisted)
            for k, v in metrics.items():
                totals[k] = totals.get(k, 0.0) + v
            done += 1
        means = {k: v / done for k, v in totals.items()} if done else {}
        dynamics_loss = self.fit_dynamics(list(transitions)) if done else None
        if dynamics_loss is not None:
            means["dynamics_loss"] = dynamics_loss
        return means | ({"steps": float(done)} if done else {}) | ({"skipped_steps": float(skipped)} if skipped else {})

    def fit_dynamics(self, transitions: Sequence[tuple[str, ...]]) -> float | None:
        """`dynamics_steps` Adam steps of the dynamics model on the last `dynamics_batch` of `transitions`
        ((observation, action, next observation) texts); the mean relative error before them, None where there
        is no model or nothing to fit."""
        if self.dynamics is None or not transitions:
            return None
        c = self.config
        batch = dynamics_batch([(s, a, n) for s, a, n in transitions[-c.dynamics_batch:]], c.dynamics_dim)
        losses = [self.dynamics.update(batch) for _ in range(c.dynamics_steps)]
        return losses[0]

    def nonfinite(self) -> list[str]:
        """Names of θ's parameters holding a NaN or an infinity (none for a θ fit to publish)."""
        return [name for name, p in self.net.named_parameters() if not bool(torch.isfinite(p).all())]

    def snapshot(self) -> dict[str, Any]:
        """θ and its optimiser as they are now, for `restore`."""
        return copy.deepcopy({"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                              "steps": self.steps,
                              "dynamics": self.dynamics.state_dict() if self.dynamics is not None else None})

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.net.load_state_dict(snapshot["net"])
        self.optimizer.load_state_dict(snapshot["optimizer"])
        self.steps = snapshot["steps"]
        if snapshot.get("dynamics") is not None:
            self.dynamics = DynamicsCuriosity.from_state_dict(snapshot["dynamics"])

    @torch.no_grad()
    def evaluate(self, examples: Sequence[Example]) -> dict[str, float]:
        """Loss terms on `examples` without a step (no replay draw, no priority change)."""
        self.net.eval()
        terms, _ = self.losses(self.collate(examples))
        return {k: float(v) for k, v in terms.items()}

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "vocab": self.vocab.to_dict(),
            "net_config": self.net_config.to_dict(),
            "train_config": asdict(self.config),
            "featurizer": self.featurizer.spec,
            "steps": self.steps,
            "version": self.version,
            "demonstrated": dict(self.demonstrated),
            **({"dynamics": self.dynamics.state_dict()} if self.dynamics is not None else {}),
        }

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint atomically (a crash mid-write leaves the previous one intact)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".pt.tmp")
        os.close(fd)
        try:
            torch.save(self.state_dict(), tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def load(self, path: str | Path) -> None:
        state = torch.load(path, weights_only=True)
        if state["featurizer"] != self.featurizer.spec or NetConfig.from_dict(state["net_config"]) != self.net_config:
            raise ValueError(
                f"checkpoint {path} was trained with {state['featurizer']} / {state['net_config']}, "
                f"not {self.featurizer.spec} / {self.net_config.to_dict()}"
            )
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.vocab = SkillVocab.from_dict(state["vocab"])
        self.steps, self.version = int(state["steps"]), int(state["version"])
        self.demonstrated = Counter({str(a): int(n) for a, n in state.get("demonstrated", {}).items()})
        if "dynamics" in state and self.dynamics is not None:  # a checkpoint from before it keeps a fresh one
            self.dynamics = DynamicsCuriosity.from_state_dict(state["dynamics"])

    def export(self, directory: str | Path) -> Path:
        """Publish the next policy version as ONNX (see `export.export_policy`)."""
        self.version += 1
        limit = self.settings.demonstrated_actions
        return export_policy(self.net, self.vocab, self.featurizer.spec, directory, self.version,
                             dynamics=self.dynamics.weights() if self.dynamics is not None else None,
                             demonstrated=[a for a, _ in self.demonstrated.most_common(limit)])
