"""The learner core: θ in torch, with no service plumbing (seed 000 §3, seed 004 §3).

Modules, each swappable on its own: `features` (text -> vectors), `tokens` (text -> token ids and
exact-match features, for the reader), `data` (episodes -> examples -> arrays), `networks` (skill
embeddings, policy and value over vectors), `reader` (the same over tokens, by cross-attention),
`losses` (the loss terms), `replay` (prioritised, mixed, durable buffers), `train` (the update step),
`export` (ONNX and scorers).
"""

from evoskill.core.learn.data import (
    Example,
    Inputs,
    PolicyInputs,
    TextEncoder,
    episode_examples,
    make_inputs,
    state_text,
)
from evoskill.core.learn.export import (
    OnnxPolicy,
    PolicyScorer,
    TorchPolicy,
    export_policy,
    latest_policy,
    policy_file_name,
    text_encoder_from_spec,
)
from evoskill.core.learn.features import (
    CachedFeaturizer,
    Featurizer,
    HashingFeaturizer,
    MiniLMFeaturizer,
    featurizer_from_spec,
)
from evoskill.core.learn.networks import UNK, NetConfig, PolicyValueNet, SkillVocab
from evoskill.core.learn.reader import ReaderNet
from evoskill.core.learn.replay import MixedReplay, PrioritizedReplay, ReplaySample, policy_version_number
from evoskill.core.learn.tokens import TokenFeaturizer, TokenInputs
from evoskill.core.learn.train import Batch, Learner, TrainConfig

__all__ = [
    "UNK",
    "Batch",
    "CachedFeaturizer",
    "Example",
    "Featurizer",
    "HashingFeaturizer",
    "Inputs",
    "Learner",
    "MiniLMFeaturizer",
    "MixedReplay",
    "NetConfig",
    "OnnxPolicy",
    "PolicyInputs",
    "PolicyScorer",
    "PolicyValueNet",
    "PrioritizedReplay",
    "ReaderNet",
    "ReplaySample",
    "SkillVocab",
    "TextEncoder",
    "TokenFeaturizer",
    "TokenInputs",
    "TorchPolicy",
    "TrainConfig",
    "episode_examples",
    "export_policy",
    "featurizer_from_spec",
    "latest_policy",
    "make_inputs",
    "policy_file_name",
    "policy_version_number",
    "state_text",
    "text_encoder_from_spec",
]
