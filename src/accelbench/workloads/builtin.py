"""Register the built-in workload descriptions and declare their implementations.

The registry imports this module lazily (``registry._ensure_builtins``). It
imports no framework: implementations are declared by import path and loaded
by the backend that runs them.
"""

from __future__ import annotations

from accelbench.workloads import (  # noqa: F401  (imported for registration)
    bert,
    deepspeech,
    images,
    llm,
    lstm,
    transformer,
    vit,
)
from accelbench.workloads.registry import declare_implementation

#: (workload, torch implementation, JAX implementation), each "module:Class".
_BUILTIN: tuple[tuple[str, str, str], ...] = (
    ("resnet50", "resnet:ResNet50Impl", "resnet:ResNet50Impl"),
    ("vgg16", "vgg:VGG16Impl", "vgg:VGG16Impl"),
    ("inception_v3", "inception:InceptionV3Impl", "inception:InceptionV3Impl"),
    ("lstm", "lstm:LSTMImpl", "lstm:LSTMImpl"),
    ("deepspeech2", "deepspeech:DeepSpeech2Impl", "deepspeech:DeepSpeech2Impl"),
    ("transformer", "transformer:TransformerImpl", "transformer:TransformerImpl"),
    ("llm", "llm:LLMImpl", "llm:LLMImpl"),
    ("bert", "bert:BertImpl", "bert:BertImpl"),
    ("vit", "vit:ViTImpl", "vit:ViTImpl"),
)

for _name, _torch, _jax in _BUILTIN:
    declare_implementation(_name, "torch", f"accelbench.backends.torch.models.{_torch}")
    declare_implementation(_name, "jax", f"accelbench.backends.jax.models.{_jax}")
