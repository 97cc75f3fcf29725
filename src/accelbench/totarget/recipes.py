"""Each workload's to-target recipe and target, declared in one place.

A recipe is what MLPerf calls the hyperparameters (optimizer, learning rate, its warm-up and
schedule, batch size) plus the learnable data it trains on and the target the held-out metric
must reach. ``accelbench train`` overrides ``lr`` and ``batch_size`` from the command line
(:meth:`Recipe.with_overrides`); everything else is read here.

How the targets were chosen (docs/totarget.md):

- Language models (lstm: next token; transformer: next target token) train on a random Markov
  chain over 16 of their ids with 3 successors per state; the target is the chain's entropy
  rate (the lowest loss any model reaches in expectation, computed exactly) plus 0.15 nats.
- Image classifiers (resnet50) train on class templates plus noise whose Bayes accuracy is at
  least 0.999 (union bound); the target is 0.90 accuracy on the held-out split.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from accelbench.data.transforms import MASK_FRACTION
from accelbench.errors import ConfigError
from accelbench.totarget.learnable import ImageSource, MarkovSource

Family = Literal["lm", "seq2seq", "masked", "image", "speech"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Recipe:
    """How one workload trains to its target at one size."""

    workload: str
    size: str
    family: Family
    optimizer: Literal["adam", "sgd"]
    lr: float
    warmup_steps: int
    """Linear warm-up from lr / warmup_steps to lr, then constant."""
    batch_size: int
    """Sequences (language models) or images per step."""
    metric: Literal["loss", "accuracy", "cer"]
    """The held-out metric: mean next-token cross entropy (nats; lower is better) or accuracy."""
    margin: float = 0.15
    """Language models: the target is the entropy rate plus this (nats)."""
    accuracy_target: float = 0.90
    """Classifiers: the target accuracy; speech: the target character error rate."""
    states: int = 16
    branching: int = 3
    noise: float = 1.0
    eval_sequences: int = 256
    """Held-out split size: sequences (language models) or images."""
    data: Literal["generated", "digits", "path"] = "generated"
    """The generated learnable data; scikit-learn's digits (real images, classifiers); or
    a user's folder (:attr:`data_path`)."""
    data_seed: int = 1234
    """The data source is the same for every seed; seeds change the model and the batches."""
    data_path: str = ""
    """``data == "path"``: the user's folder (``train/`` and ``val/``)."""
    feed: Literal["files", "memory"] = "files"
    """files: the dataset written to disk once and read through the input pipeline
    (``DataLoader`` over the files, :mod:`accelbench.totarget.ondisk`); memory: batches
    drawn from the source in memory, fresh each step (the first slice's way; tests)."""
    train_samples: int = 4096
    """Generated data on disk: training images, or training tokens (language models)."""
    classes: int = 10
    """Generated images: the model's classes at this size (the floor's templates)."""
    side: int = 0
    """Generated images: the model's resolution at this size."""
    masked_length: int = 0
    """bert: the window's tokens (the masked floor's length)."""
    loader_workers: int = field(default=0, compare=False)
    """``DataLoader`` worker processes (0: batches made in the training process). How
    the data is read, not what is learned: not compared (the references still apply)."""

    def with_overrides(self, *, lr: float | None = None, batch_size: int | None = None,
                       data: str = "generated", loader_workers: int | None = None,
                       feed: str | None = None) -> Recipe:
        """The recipe with the values given on the command line (``data``: generated,
        digits, or a PATH)."""
        if data == "digits" and self.family != "image":
            raise ConfigError(f"--data digits: {self.workload} is not an image classifier")
        if data == "synthetic":
            raise ConfigError("--data synthetic: train needs learnable data (generated, "
                              "digits or a PATH with train/ and val/)")
        if feed not in (None, "files", "memory"):
            raise ConfigError(f"feed {feed!r}: files or memory")
        if feed == "memory" and self.family == "speech":
            raise ConfigError(f"{self.workload}: speech is read from disk only")
        named = data in ("generated", "digits")
        if not named and feed == "memory":
            raise ConfigError(f"--data {data}: a user's folder is read from disk, not memory")
        path = "" if named else os.path.abspath(data)
        return dataclasses.replace(
            self, lr=self.lr if lr is None else lr,
            batch_size=self.batch_size if batch_size is None else batch_size,
            data=data if named else "path", data_path=path,  # type: ignore[arg-type]
            feed=self.feed if feed is None else feed,  # type: ignore[arg-type]
            loader_workers=self.loader_workers if loader_workers is None
            else loader_workers)

    @property
    def lower_is_better(self) -> bool:
        """Loss targets are reached from above, accuracy from below."""
        return self.metric in ("loss", "cer")

    def markov(self) -> MarkovSource:
        """The token source of a language-model recipe."""
        return MarkovSource.make(states=self.states, branching=self.branching,
                                 seed=self.data_seed)

    def images(self, *, classes: int, side: int) -> ImageSource:
        """The image source of a classifier recipe."""
        return ImageSource.make(classes=classes, side=side, noise=self.noise,
                                seed=self.data_seed)

    def floor(self) -> float:
        """The floor the target stands on: the chain's entropy rate (next-token models), a
        bound on the masked-token floor (bert: :meth:`MarkovSource.masked_floor`), or the
        lower bound on the Bayes accuracy (generated images)."""
        if self.family == "masked":
            return _masked_floor(self.states, self.branching, self.data_seed,
                                 self.masked_length)
        if self.metric == "loss":
            return self.markov().entropy_rate
        if self.metric == "cer":
            return 0.0  # every character its own formant pair (docs/totarget.md)
        return self.images(classes=self.classes, side=self.side).bayes_accuracy_floor

    def auto_target(self) -> float:
        """The documented target (``--target auto``).

        Raises:
            ConfigError: the data is a user's folder, which has no documented target.
        """
        if self.data == "path":
            raise ConfigError(f"--target auto: there is no documented target for your own "
                              f"data (--data {self.data_path}); give --target VALUE")
        if self.metric == "loss":
            return self.floor() + self.margin
        return self.accuracy_target

    def reached(self, value: float, target: float) -> bool:
        """Whether a held-out ``value`` meets ``target``."""
        return value <= target if self.lower_is_better else value >= target


RECIPES: dict[tuple[str, str], Recipe] = {
    ("lstm", "tiny"): Recipe(workload="lstm", size="tiny", family="lm", optimizer="adam",
                             lr=1e-2, warmup_steps=10, batch_size=32, metric="loss",
                             train_samples=1 << 19),
    ("transformer", "tiny"): Recipe(workload="transformer", size="tiny", family="seq2seq",
                                    optimizer="adam", lr=3e-3, warmup_steps=20,
                                    batch_size=32, metric="loss", train_samples=1 << 19),
    ("resnet50", "tiny"): Recipe(workload="resnet50", size="tiny", family="image",
                                 optimizer="adam", lr=2e-3, warmup_steps=10, batch_size=32,
                                 metric="accuracy", noise=3.0, eval_sequences=200,
                                 side=64),
    ("vit", "tiny"): Recipe(workload="vit", size="tiny", family="image", optimizer="adam",
                            lr=2e-3, warmup_steps=10, batch_size=32, metric="accuracy",
                            noise=2.0, eval_sequences=200, side=16),
    ("vgg16", "tiny"): Recipe(workload="vgg16", size="tiny", family="image",
                              optimizer="adam", lr=1e-3, warmup_steps=10, batch_size=32,
                              metric="accuracy", noise=2.0, eval_sequences=200, side=32),
    ("inception_v3", "tiny"): Recipe(workload="inception_v3", size="tiny", family="image",
                                     optimizer="adam", lr=2e-3, warmup_steps=10,
                                     batch_size=32, metric="accuracy", noise=3.0,
                                     eval_sequences=200, side=107),
    ("llm", "tiny"): Recipe(workload="llm", size="tiny", family="lm", optimizer="adam",
                            lr=3e-3, warmup_steps=20, batch_size=32, metric="loss",
                            train_samples=1 << 19),
    ("llm", "small"): Recipe(workload="llm", size="small", family="lm", optimizer="adam",
                             lr=1e-3, warmup_steps=20, batch_size=32, metric="loss",
                             train_samples=1 << 20),
    ("transformer", "small"): Recipe(workload="transformer", size="small",
                                     family="seq2seq", optimizer="adam", lr=1e-3,
                                     warmup_steps=20, batch_size=32, metric="loss",
                                     train_samples=1 << 20),
    ("vit", "small"): Recipe(workload="vit", size="small", family="image", optimizer="adam",
                             lr=1e-3, warmup_steps=10, batch_size=32, metric="accuracy",
                             noise=2.0, eval_sequences=500, side=32, classes=100,
                             train_samples=8192),
    ("deepspeech2", "tiny"): Recipe(workload="deepspeech2", size="tiny", family="speech",
                                    optimizer="adam", lr=3e-3, warmup_steps=10,
                                    batch_size=32, metric="cer", accuracy_target=0.10,
                                    eval_sequences=200, train_samples=2048),
    ("bert", "tiny"): Recipe(workload="bert", size="tiny", family="masked", optimizer="adam",
                             lr=3e-3, warmup_steps=20, batch_size=32, metric="loss",
                             train_samples=1 << 19, masked_length=16),
}

#: Recipes declared but refused here, each with the measured reason: (workload, size) ->
#: (recipe, why). ``recipe_for`` refuses them in one line; they are what a faster machine
#: would run (docs/totarget.md, "Not there yet"). Measured 2026-12-07 on the shared 2-core
#: VM, torch 2.13.0+cpu, one thread, load 12-18.
REFUSED: dict[tuple[str, str], tuple[Recipe, str]] = {
    ("lstm", "small"): (
        Recipe(workload="lstm", size="small", family="lm", optimizer="adam", lr=2e-3,
               warmup_steps=20, batch_size=32, metric="loss", train_samples=1 << 20),
        "measured 3.2 sequences/s here (512 in 159 s, hidden 650 and a 10,000-word "
        "softmax); lstm tiny needs 21,000-42,000 sequences to its target"),
    ("bert", "small"): (
        Recipe(workload="bert", size="small", family="masked", optimizer="adam", lr=3e-3,
               warmup_steps=20, batch_size=32, metric="loss", train_samples=1 << 20,
               masked_length=64),
        "measured 14-35 windows/s here, and the held-out loss still at 2.40 nats (the "
        "unigram plateau; target 1.04) after 3,584-5,280 windows (lr 1e-3 and 3e-3 at "
        "batch 32, 3e-3 at batch 8); bert tiny needs 17,000-42,000 windows"),
    ("resnet50", "small"): (
        Recipe(workload="resnet50", size="small", family="image", optimizer="adam",
               lr=2e-3, warmup_steps=10, batch_size=32, metric="accuracy", noise=3.0,
               eval_sequences=200, side=112, classes=1000),
        "measured 2.4 images/s here (a training step of 32 at 112 x 112 took 13.2 s); "
        "resnet50 tiny needs 3,000-4,600 images to its target"),
    ("vgg16", "small"): (
        Recipe(workload="vgg16", size="small", family="image", optimizer="adam", lr=1e-3,
               warmup_steps=10, batch_size=32, metric="accuracy", noise=2.0,
               eval_sequences=200, side=112, classes=1000),
        "measured 3.3 images/s here (a training step of 32 at 112 x 112 took 9.7 s); "
        "vgg16 tiny needs 10,000-30,000 images to its target"),
    ("inception_v3", "small"): (
        Recipe(workload="inception_v3", size="small", family="image", optimizer="adam",
               lr=2e-3, warmup_steps=10, batch_size=32, metric="accuracy", noise=3.0,
               eval_sequences=200, side=160, classes=1000),
        "measured 2.5 images/s here (a training step of 32 at 160 x 160 took 12.7 s); "
        "inception_v3 tiny needs 4,000 images to its target"),
}


@cache
def _masked_floor(states: int, branching: int, seed: int, length: int) -> float:
    return MarkovSource.make(states=states, branching=branching, seed=seed).masked_floor(
        length=length, fraction=MASK_FRACTION)


def recipe_for(workload: str, size: str) -> Recipe:
    """The recipe of ``workload`` at ``size``, or a one-line refusal naming those there are."""
    found = RECIPES.get((workload, size))
    if found is None and (workload, size) in REFUSED:
        raise ConfigError(f"no to-target recipe for {workload} at size {size}: one is "
                          f"declared (totarget/recipes.py) but refused, as it was not "
                          f"measured to its target: {REFUSED[workload, size][1]}")
    if found is None:
        have = ", ".join(f"{w} {s}" for w, s in RECIPES)
        raise ConfigError(f"no to-target recipe for {workload} at size {size} (there are: "
                          f"{have})")
    return found
