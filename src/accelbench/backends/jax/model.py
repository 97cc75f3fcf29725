"""The interface of a workload's JAX implementation (Flax NNX)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from accelbench.workloads.sizes import SizeName

if TYPE_CHECKING:
    import jax
    from flax import nnx

    from accelbench.workloads.registry import Workload

#: Synthetic inputs and targets of one step (jax arrays).
JaxBatch = tuple[Any, ...]


class JaxModel(ABC):
    """How one workload is built and trained in JAX/Flax NNX.

    Registered per workload with
    ``@register_implementation("name", "jax")``; the registry builds it with the
    workload's framework-neutral description, so the size configuration comes
    from one place (``self.workload.config(size)``).

    The backend trains through a functional step (``nnx.split`` + ``jax.jit``):
    modules are built in training mode (BatchNorm on batch statistics, Dropout
    active with the ``dropout`` rng stream). Under mixed precision the backend
    casts float parameters and float inputs to the compute dtype before calling
    :meth:`loss`, so models must not hard-code float32 in the middle; the loss
    is reduced in float32.
    """

    framework: ClassVar[str] = "jax"

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    @abstractmethod
    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """The model at ``size`` in training mode, parameters in float32."""

    @abstractmethod
    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Synthetic inputs and targets for one step (same shapes as the torch twin's)."""

    @abstractmethod
    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Forward pass and scalar float32 training loss."""
