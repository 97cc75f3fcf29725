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
from dataclasses import dataclass
from typing import Literal

from accelbench.errors import ConfigError
from accelbench.totarget.learnable import ImageSource, MarkovSource

Family = Literal["lm", "seq2seq", "image"]


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
    metric: Literal["loss", "accuracy"]
    """The held-out metric: mean next-token cross entropy (nats; lower is better) or accuracy."""
    margin: float = 0.15
    """Language models: the target is the entropy rate plus this (nats)."""
    accuracy_target: float = 0.90
    """Classifiers: the target accuracy."""
    states: int = 16
    branching: int = 3
    noise: float = 1.0
    eval_sequences: int = 256
    """Held-out split size: sequences (language models) or images."""
    data: Literal["generated", "digits"] = "generated"
    """Classifiers: the generated class templates, or scikit-learn's digits (real images)."""
    data_seed: int = 1234
    """The data source is the same for every seed; seeds change the model and the batches."""

    def with_overrides(self, *, lr: float | None = None, batch_size: int | None = None,
                       data: str = "generated") -> Recipe:
        """The recipe with the values given on the command line."""
        if data not in ("generated", "digits"):
            raise ConfigError(f"--data {data}: train reads generated or digits")
        if data == "digits" and self.family != "image":
            raise ConfigError(f"--data digits: {self.workload} is not an image classifier")
        return dataclasses.replace(
            self, lr=self.lr if lr is None else lr,
            batch_size=self.batch_size if batch_size is None else batch_size,
            data="digits" if data == "digits" else "generated")

    @property
    def lower_is_better(self) -> bool:
        """Loss targets are reached from above, accuracy from below."""
        return self.metric == "loss"

    def markov(self) -> MarkovSource:
        """The token source of a language-model recipe."""
        return MarkovSource.make(states=self.states, branching=self.branching,
                                 seed=self.data_seed)

    def images(self, *, classes: int, side: int) -> ImageSource:
        """The image source of a classifier recipe."""
        return ImageSource.make(classes=classes, side=side, noise=self.noise,
                                seed=self.data_seed)

    def auto_target(self) -> float:
        """The documented target (``--target auto``)."""
        if self.metric == "loss":
            return self.markov().entropy_rate + self.margin
        return self.accuracy_target

    def reached(self, value: float, target: float) -> bool:
        """Whether a held-out ``value`` meets ``target``."""
        return value <= target if self.lower_is_better else value >= target


RECIPES: dict[tuple[str, str], Recipe] = {
    ("lstm", "tiny"): Recipe(workload="lstm", size="tiny", family="lm", optimizer="adam",
                             lr=1e-2, warmup_steps=10, batch_size=32, metric="loss"),
    ("transformer", "tiny"): Recipe(workload="transformer", size="tiny", family="seq2seq",
                                    optimizer="adam", lr=3e-3, warmup_steps=20,
                                    batch_size=32, metric="loss"),
    ("resnet50", "tiny"): Recipe(workload="resnet50", size="tiny", family="image",
                                 optimizer="adam", lr=2e-3, warmup_steps=10, batch_size=32,
                                 metric="accuracy", noise=3.0, eval_sequences=200),
}


def recipe_for(workload: str, size: str) -> Recipe:
    """The recipe of ``workload`` at ``size``, or a one-line refusal naming those there are."""
    found = RECIPES.get((workload, size))
    if found is None:
        have = ", ".join(f"{w} {s}" for w, s in RECIPES)
        raise ConfigError(f"no to-target recipe for {workload} at size {size} (there are: "
                          f"{have})")
    return found
