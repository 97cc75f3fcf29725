"""The JAX backend: devices, precisions, a jitted functional training step, OOM, FLOPs.

Models are Flax NNX modules (``accelbench.backends.jax.models``), trained
through one functional step: ``nnx.split`` into parameters and the rest of the
state, ``jax.grad`` of the workload's loss, the workload's optimizer
(:func:`make_optimizer`: optax SGD with momentum 0.9, or AdamW), all under one
``jax.jit`` with parameters, state and optimizer state donated. The step is
lowered and compiled ahead of time when it is built, so tracing and XLA
compilation are timed on their own (``compile_s``) and never reach warm-up or
throughput. Warm-up waits for every step (``block_until_ready``); measurement queues
blocks of steps whose ends a thread of their own waits for
(:meth:`JaxTrainStep.block_timer`): the loop never waits, as a training loop lets XLA's
asynchronous dispatch run ahead of the device.
The step's functions (loss, optimizer update) are defined once in
:mod:`~accelbench.backends.jax.trainfns`; ``--phases`` jits them as separate pieces
(:meth:`JaxTrainStep.phase_steps`, :mod:`~accelbench.backends.jax.phases`).

jax is imported inside functions only, after :func:`prepare_process` has set
the environment it reads once, at import.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import TYPE_CHECKING, Any

from accelbench.backends.base import (
    BaseBackend,
    DeviceInfo,
    FlopCount,
    ShapeLimits,
    host_peak_rss,
)
from accelbench.backends.blocks import StampedBlocks
from accelbench.backends.jax.hostinit import host_init
from accelbench.backends.jax.phases import JaxPhaseSteps
from accelbench.backends.jax.runtime import (
    MATMUL_PRECISION,
    import_jax,
    jax_device,
    mesh_devices,
    normalize_device,
    prepare_process,
    split_state,
)
from accelbench.backends.jax.sharding import (
    axis_sizes,
    checkpoint_blocks,
    describe,
    heads_by_device,
    like_params,
    make_mesh,
    memory_per_device,
    param_shardings,
    place_batch,
    put,
)
from accelbench.backends.jax.trainfns import COMPUTE_DTYPE, INIT_SCALE, TrainFns
from accelbench.backends.registry import register_backend
from accelbench.errors import ConfigError
from accelbench.spec import PRECISIONS, Precision

if TYPE_CHECKING:
    from accelbench.spec import FastPaths, RunSpec
    from accelbench.workloads.registry import Workload

def _precisions(d: Any) -> tuple[Precision, ...]:
    platform = d.platform
    if platform == "cpu":
        out = {"fp32", "amp_bf16"}
    elif platform == "tpu":
        out = {"fp32", "amp_bf16"}  # TPUs compute in bf16; there is no TF32 or fp16 path
    else:
        cc = str(getattr(d, "compute_capability", "0") or "0")
        major = int(cc.split(".")[0]) if cc.split(".")[0].isdigit() else 0
        out = {"fp32", "amp_fp16"}
        if major >= 8:
            out |= {"tf32", "amp_bf16"}  # TF32 and bf16 tensor cores from Ampere (sm_80) on
    return tuple(p for p in PRECISIONS if p in out)  # type: ignore[misc]


#: Texts of XLA's out-of-memory errors (device and host allocators: ``RESOURCE_EXHAUSTED:
#: Out of memory while trying to allocate N bytes``), and a C++ ``std::bad_alloc``.
_OOM_TEXTS = ("resource_exhausted", "out of memory", "std::bad_alloc", "can't allocate memory")


def is_oom(exc: BaseException) -> bool:
    """True for host MemoryError and XLA's ``RESOURCE_EXHAUSTED`` (device or host)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(t in text for t in _OOM_TEXTS)


def make_optimizer(workload: Any) -> Any:
    """The optax optimizer ``workload.optimizer`` names, as torch's backend builds it.

    ``sgd``: momentum 0.9 (the paper's six models); ``adamw``: betas 0.9/0.95 and the
    workload's decoupled ``weight_decay`` on every parameter (torch's AdamW default).

    Raises:
        ConfigError: an optimizer name neither framework knows.
    """
    import optax

    name = getattr(workload, "optimizer", "sgd")
    lr = workload.learning_rate
    if name == "sgd":
        return optax.sgd(lr, momentum=0.9)
    if name == "adamw":
        return optax.adamw(lr, b1=0.9, b2=0.95, weight_decay=workload.weight_decay)
    raise ConfigError(f"workload {workload.name!r}: unknown optimizer {name!r}; use sgd or adamw")


def _wait_ready(loss: Any) -> None:
    """Blocks until a step's loss (and so the whole step) is ready."""
    loss.block_until_ready()


class JaxTrainStep:
    """One workload's jitted training step, compiled once on its device.

    Args:
        impl: The workload's JAX implementation (:class:`~accelbench.backends.jax.JaxModel`).
        spec: The case; its device and precision must already be checked.
    """

    def __init__(self, impl: Any, spec: RunSpec) -> None:
        jax = import_jax()
        import jax.numpy as jnp
        from flax import nnx

        self.spec = spec
        self.device = jax_device(spec.device)
        workload = impl.workload
        compute = COMPUTE_DTYPE.get(spec.precision)
        compute_dtype = jnp.dtype(compute) if compute else None
        topo = spec.topology
        with jax.default_device(self.device):
            with host_init():  # the initialisers' draws: one XLA program per size bucket
                model = impl.build_model(spec.size, nnx.Rngs(spec.seed))
            blocks = checkpoint_blocks(model) if topo.act_ckpt else 0
            heads_by_device(model, spec)  # tensor parallelism: fused q|k|v by device
            graphdef, params, rest = split_state(model)
            # --data generated|PATH: each step takes its batch from a loader, timed.
            self._next_batch: Any = None
            self.input_timer: Any = None
            #: Where each loaded batch goes: the device, or (a mesh) the batch's shardings.
            self._batch_at: Any = self.device
            if spec.data != "synthetic":
                from accelbench.backends.jax.input import open_feed

                self._next_batch, self.input_timer = open_feed(
                    workload, spec, lambda b: jax.device_put(b, self._batch_at),
                    _replicas(spec))
                batch = self._next_batch()  # the workers start here, outside any window
            else:
                batch = impl.make_batch(spec.size, spec.batch_size, jax.random.key(spec.seed))
        self.param_count = int(sum(x.size for x in jax.tree.leaves(params)))
        tx = make_optimizer(workload)
        fp16 = spec.precision == "amp_fp16"
        scale = {"scale": jnp.float32(INIT_SCALE if fp16 else 1.0), "good": jnp.int32(0)}
        params, rest, opt_state, scale, batch, shardings = self._place(
            tx, params, rest, scale, batch, blocks)
        self.fns = TrainFns(impl=impl, graphdef=graphdef,
                            rest_dtypes=jax.tree.map(lambda x: x.dtype, rest),
                            compute_dtype=compute_dtype, tx=tx, fp16=fp16)
        # Only amp_fp16 changes its loss scale: the other precisions' step takes none (a
        # constant of the program, not two buffers more each way; state keeps the 1.0).
        on = _jit_shardings(shardings, fp16)
        if fp16:
            jitted = jax.jit(self.fns.train_step, donate_argnums=(0, 1, 2, 3), **on)
            args: tuple[Any, ...] = (params, rest, opt_state, scale, batch)
        else:
            jitted = jax.jit(self.fns.train_step_unscaled, donate_argnums=(0, 1, 2), **on)
            args = (params, rest, opt_state, batch)
        # CPUs cannot donate buffers and XLA warns on every call; the step is the same.
        warnings.filterwarnings("ignore", message=".*donated buffers.*")
        self.matmul_precision = matmul = MATMUL_PRECISION.get(spec.precision, "default")
        t0 = time.perf_counter()
        with jax.default_matmul_precision(matmul):
            self._compiled = jitted.lower(*args).compile()
        self.compile_s: float | None = time.perf_counter() - t0
        self._state = (params, rest, opt_state, scale)
        self._batch = batch
        #: A sharded case's ``NamedSharding`` trees ``(params, rest, opt_state, scale,
        #: batch, replicated)`` (the step's in and out shardings; ``--phases``' pieces
        #: keep them), else None.
        self.shardings: tuple[Any, ...] | None = shardings
        #: A mesh of several CPU host devices runs one execution at a time: XLA:CPU's
        #: in-process collectives deadlock when executions are queued (a device's pool
        #: thread waits at the next step's rendezvous for a peer that gets no thread; the
        #: process aborts after 40 s), so each step first waits for the one before.
        self.serial = (self.mesh is not None and self.mesh.size > 1
                       and self.device.platform == "cpu")
        self.last_loss: Any = None
        self._xla_flops = _cost_flops(self._compiled)
        self._phases: JaxPhaseSteps | None = None

    def _place(self, tx: Any, params: Any, rest: Any, scale: Any, batch: Any, blocks: int
               ) -> tuple[Any, ...]:
        """The state (the optimizer's initialised) and batch on the case's device, or on
        its mesh for a sharded case (--parallel/--devices/--act-ckpt: :attr:`mesh`,
        :attr:`sharding`), with their shardings there (None on one device)."""
        jax = import_jax()
        topo = self.spec.topology
        #: The mesh of a sharded case, else None.
        self.mesh: Any = None
        self.sharding: dict[str, Any] = {}
        if not topo.sharded and topo.world_size == 1:  # many processes: always a mesh
            params, rest, batch = jax.device_put((params, rest, batch), self.device)
            return (params, rest, tx.init(params), jax.device_put(scale, self.device), batch,
                    None)
        self.mesh = make_mesh(self.spec, mesh_devices(self.spec.device, topo.mesh_size))
        self.sharding = describe(self.spec, self.mesh, blocks)
        if self._next_batch is not None:  # a loaded batch: the replicas' own rows already
            from accelbench.backends.jax.input import mesh_batch_shardings

            self._batch_at = mesh_batch_shardings(batch, self.mesh)
        return _placed(self.mesh, self.spec, tx, params, rest, scale, batch,
                       None if self._next_batch is None else self._batch_at)

    def step(self) -> None:
        """One training iteration; returns once XLA has queued it (asynchronous dispatch).
        With a data loader, the iteration starts by waiting for its batch (timed by
        :attr:`input_timer`)."""
        if self._next_batch is not None:
            self._batch = self._next_batch()
        if self.serial and self.last_loss is not None:
            self.last_loss.block_until_ready()
        if self.fns.fp16:  # the step takes and returns the loss scale
            *state, loss = self._compiled(*self._state, self._batch)
            self._state = tuple(state)
        else:
            params, rest, opt_state, scale = self._state
            params, rest, opt_state, loss = self._compiled(params, rest, opt_state,
                                                           self._batch)
            self._state = (params, rest, opt_state, scale)
        self.last_loss = loss

    @property
    def state(self) -> tuple[Any, Any, Any, Any]:
        """``(params, rest, opt_state, scale)`` as the last step left them (the compiled
        step donates them: read them again after each step)."""
        return self._state

    @state.setter
    def state(self, value: tuple[Any, Any, Any, Any]) -> None:
        self._state = value

    @property
    def batch(self) -> Any:
        """The case's batch, on its device."""
        return self._batch

    def phase_steps(self) -> JaxPhaseSteps:
        """The step's compiled pieces for ``--phases`` (made once; each piece is compiled
        on first use, so a case without ``--phases`` never pays for them)."""
        if self._phases is None:
            self._phases = JaxPhaseSteps(self)
        return self._phases

    def synchronize(self) -> None:
        """Block until the last step has finished.

        All outputs of one XLA execution become ready together, so waiting for the
        loss waits for the new parameters too, without walking the parameter tree
        (which costs about 0.8 ms per step for ResNet-50 on a CPU).
        """
        if self.last_loss is not None:
            self.last_loss.block_until_ready()

    def loss_value(self) -> float | None:
        """The last step's loss as a float (synchronises)."""
        return float(self.last_loss) if self.last_loss is not None else None

    def block_timer(self) -> StampedBlocks:
        """Blocks of steps queued behind XLA's asynchronous dispatch, each timed by a thread
        of its own that waits for the block's last loss (which every earlier step's outputs
        feed, and all outputs of one execution become ready together): the loop that
        queues the steps never waits for the device."""
        return StampedBlocks(self.step, lambda: self.last_loss, _wait_ready)

    def extra(self) -> dict[str, Any]:
        """XLA's own FLOP estimate of the compiled step, per sample, and whether a persistent
        compilation cache was on (then ``compile_s`` may be a cache load, not a compile)."""
        jax = import_jax()
        out: dict[str, Any] = {}
        if self._xla_flops and self.mesh is None:  # a mesh's program is one device's share
            out["xla_flop_per_sample"] = self._xla_flops / self.spec.batch_size
        if self.mesh is not None:
            out["sharding"] = {**self.sharding, "memory_per_device": memory_per_device(
                list(self.mesh.devices.flat))}
        cache_dir = jax.config.jax_compilation_cache_dir
        if cache_dir:
            out["xla_compilation_cache"] = str(cache_dir)
        return out

    def peak_memory(self) -> tuple[int | None, str]:
        """GPU/TPU: XLA's ``peak_bytes_in_use`` of the device (of a mesh: the largest of
        its devices'); CPU (where XLA keeps no statistics): the worker's peak RSS."""
        if self.mesh is not None and self.mesh.size > 1:
            per = memory_per_device(list(self.mesh.devices.flat))
            if isinstance(per, list):
                return (max(d["peak_memory_bytes"] for d in per),
                        f"XLA memory_stats peak_bytes_in_use, the largest of "
                        f"{self.mesh.size} devices")
        try:
            stats = self.device.memory_stats()
        except Exception:  # noqa: BLE001 - a backend without statistics
            stats = None
        if stats and stats.get("peak_bytes_in_use") is not None:
            return int(stats["peak_bytes_in_use"]), "XLA memory_stats peak_bytes_in_use"
        if self.device.platform == "cpu":
            return host_peak_rss()
        return None, f"XLA reports no memory statistics on {self.device.platform}"


def _replicas(spec: RunSpec) -> int:
    """The data-parallel replicas of a case's one-process mesh (1 without one)."""
    topo = spec.topology
    if not topo.sharded:
        return 1
    sizes = axis_sizes(spec)
    return sizes["data"] * sizes["fsdp"]


def _jit_shardings(shardings: tuple[Any, ...] | None, fp16: bool) -> dict[str, Any]:
    """``jax.jit``'s in and out shardings of a sharded case's step (none otherwise): every
    input's sharding kept on its output (GSPMD inserts the collectives), the loss
    replicated."""
    if shardings is None:
        return {}
    p_sh, r_sh, o_sh, s_sh, b_sh, whole = shardings
    ins = (p_sh, r_sh, o_sh, s_sh, b_sh) if fp16 else (p_sh, r_sh, o_sh, b_sh)
    return {"in_shardings": ins, "out_shardings": (*ins[:-1], whole)}


def _placed(mesh: Any, spec: RunSpec, tx: Any, params: Any, rest: Any, scale: Any,
            batch: Any, batch_at: Any = None) -> tuple[Any, ...]:
    """The state and batch on the mesh (:mod:`accelbench.backends.jax.sharding`), and
    their shardings ``(params, rest, opt_state, scale, batch, replicated)``; a loaded
    batch (every replica's rows) goes on ``batch_at``, its shardings, as it is."""
    jax = import_jax()
    from jax.sharding import NamedSharding, PartitionSpec

    whole = NamedSharding(mesh, PartitionSpec())
    p_sh = param_shardings(params, mesh, spec)
    params = put(params, p_sh)
    r_sh = jax.tree.map(lambda _: whole, rest)
    rest = put(rest, r_sh)
    o_sh = like_params(jax.eval_shape(tx.init, params), params, p_sh, mesh)
    opt_state = jax.jit(tx.init, out_shardings=o_sh)(params)
    s_sh = jax.tree.map(lambda _: whole, scale)
    scale = put(scale, s_sh)
    batch = place_batch(batch, mesh) if batch_at is None else jax.device_put(batch, batch_at)
    b_sh = jax.tree.map(lambda x: x.sharding, batch)
    return params, rest, opt_state, scale, batch, (p_sh, r_sh, o_sh, s_sh, b_sh, whole)


def _cost_flops(compiled: Any) -> float | None:
    """FLOPs of a compiled XLA executable by its cost analysis (None where unsupported)."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # some platforms have no cost model
        return None
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else None
    if not isinstance(cost, dict):
        return None
    flops = cost.get("flops")
    return float(flops) if flops and flops > 0 else None


#: Why each fast path is refused for JAX: it has no such switch because the path is
#: always on, so a JAX case carrying the flag would claim a change that did nothing.
JAX_FAST_PATHS = {
    "compile": "--compile: JAX always compiles (jax.jit); its compile time is already "
               "stored as compile_s; drop the option for framework jax",
    "channels_last": "--channels-last: JAX's convolutions are already channels-last (NHWC); "
                     "drop the option for framework jax",
    "fused_optimizer": "--fused-optimizer: XLA already fuses JAX's optimizer update into "
                       "the jitted step; drop the option for framework jax",
}


@register_backend
class JaxBackend(BaseBackend):
    """JAX with Flax NNX: ``cpu``, ``cuda:N`` (the CUDA build) and ``tpu:N``."""

    name = "jax"
    aliases = ("flax",)
    label = "JAX"
    compile_label = "XLA compile"
    has_phases = True
    totarget = "accelbench.backends.jax.totarget"
    #: ``--data generated|PATH``: a loader feeds the step (backends/jax/input.py).
    has_data_loader = True
    #: ``--devices N``: one process's devices as a jax.sharding mesh (backends/jax/sharding.py).
    mesh_devices = True
    list_order = 1
    models = "accelbench.backends.jax.models"
    package = "jax"
    install_hint = ("pip install -e '.[jax]'  (CPU; NVIDIA GPUs: pip install -U 'jax[cuda12]', "
                    "TPUs: pip install -U 'jax[tpu]')")
    stack_packages = ("jax", "jaxlib", "flax", "optax")
    version_facts = (("jax", "JAX"), ("jaxlib", "jaxlib"), ("flax", "Flax"), ("optax", "Optax"),
                     ("jax_backend", "JAX backend"), ("jax_platform_version", "XLA platform"))
    device_libraries = ("jaxlib",)
    model_sources = ("backends/jax/models/*.py", "backends/jax/model.py",
                     "backends/jax/flops.py")
    # Calibrated as torch's (`benchmarks/noise.py --part 3`, 18 quiet JAX runs of every tiny
    # workload): the largest quiet q3/q1 was 1.16 and the largest trimmed-mean distance 12%
    # (inception_v3), plus 10% room.
    quiet_shape = {"cpu": ShapeLimits(1.30, 0.15, "18 quiet JAX runs (noise.py part 3)",
                                      shift=0.05)}

    def normalize_device(self, device: str) -> str:
        return normalize_device(device)

    def prepare_process(self, spec: RunSpec) -> None:
        prepare_process(spec)

    def devices(self) -> list[DeviceInfo]:
        """The CPU, then every GPU and TPU jax sees."""
        jax = import_jax()

        from accelbench.devices.discovery import cpu_info

        cpus = jax.devices("cpu")
        out = [DeviceInfo(device="cpu", name=str(cpu_info()["model"]), vendor="cpu",
                          precisions=_precisions(cpus[0]),
                          details={"xla_host_devices": len(cpus)})]
        for platform, kind in (("gpu", "cuda"), ("tpu", "tpu")):
            try:
                found = jax.devices(platform)
            except RuntimeError:
                continue  # this jax build has no such backend
            for i, d in enumerate(found):
                details: dict[str, Any] = {"runtime": str(d.client.platform_version)}
                stats = _memory_stats(d)
                if stats.get("bytes_limit"):
                    details["memory_bytes"] = int(stats["bytes_limit"])
                cc = getattr(d, "compute_capability", None)
                if cc:
                    details["compute_capability"] = str(cc)
                out.append(DeviceInfo(
                    device=f"{kind}:{i}", name=str(d.device_kind),
                    vendor="google" if kind == "tpu" else "nvidia",
                    precisions=_precisions(d), details=details,
                ))
        return out

    def versions(self) -> dict[str, Any]:
        """jax, jaxlib, flax and optax versions, and the default backend's platform."""
        jax = import_jax()
        import flax
        import jaxlib
        import optax

        return {
            "jax": jax.__version__,
            "jaxlib": jaxlib.__version__,
            "flax": flax.__version__,
            "optax": optax.__version__,
            "jax_backend": jax.default_backend(),
            "jax_platform_version": str(jax.devices()[0].client.platform_version),
        }

    def build_step(self, spec: RunSpec, impl: Any) -> JaxTrainStep:
        return JaxTrainStep(impl, spec)

    def check_fast_paths(self, fast_paths: FastPaths, device: str, workload: Workload) -> None:
        """Every fast path is always on in JAX: refuse the flag (:data:`JAX_FAST_PATHS`)."""
        del device, workload
        enabled = fast_paths.enabled()
        if enabled:
            raise ConfigError(JAX_FAST_PATHS[enabled[0]])

    def distributed(self) -> Any:
        """jax.distributed across processes started by the rank launcher
        (:mod:`accelbench.backends.jax.distributed`)."""
        from accelbench.backends.jax.distributed import JaxDistributed

        return JaxDistributed()

    def check_sharding(self, spec: RunSpec) -> None:
        """``--parallel``/``--devices``/``--act-ckpt``: the workload has the plan the mode
        needs (:func:`accelbench.backends.jax.sharding.check`)."""
        from accelbench.backends.jax.sharding import check
        from accelbench.workloads.registry import get_workload

        wl = get_workload(spec.workload)
        cfg = wl.config(spec.size) if callable(getattr(wl, "config", None)) else None
        widths = tuple(int(getattr(cfg, n)) for n in ("heads", "kv_heads", "ffn")
                       if isinstance(getattr(cfg, n, None), int))
        check(spec, widths)

    def is_oom(self, exc: BaseException) -> bool:
        return is_oom(exc)

    def param_count(self, impl: Any, size: str) -> int:
        """Counted on abstract shapes (``nnx.eval_shape``): nothing is allocated."""
        jax = import_jax()
        from flax import nnx

        model = nnx.eval_shape(lambda: impl.build_model(size, nnx.Rngs(0)))
        return int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))

    def count_flops(self, impl: Any, size: str, batch_size: int) -> FlopCount:
        from accelbench.backends.jax.flops import count_flops

        import_jax()  # the count traces the model: in linear time
        return count_flops(impl, size, batch_size)

    def ops(self) -> Any:
        """The operator benchmarks (matmul, conv2d, LSTM layer, attention, device copy)."""
        from accelbench.backends.jax.opbench import JaxOps

        return JaxOps()

    def device_uuid(self, device: str) -> str | None:
        """None: jax does not expose GPU UUIDs; meters map ``cuda:N`` through
        ``CUDA_VISIBLE_DEVICES``, the same ordinal jax uses."""
        del device
        return None


def _memory_stats(d: Any) -> dict[str, Any]:
    with contextlib.suppress(Exception):
        stats = d.memory_stats()
        if isinstance(stats, dict):
            return stats
    return {}
