"""Learnable data with a target known to be attainable, generated in memory (numpy only).

- Tokens: a random Markov chain over the first ``states`` ids of a vocabulary, each state
  moving to ``branching`` others with Dirichlet(1) weights. Its entropy rate
  H = -sum_i pi_i sum_j P_ij log P_ij (pi the stationary distribution) is the lowest mean
  next-token cross entropy any model can reach in expectation; the target is H plus a stated
  margin (nats).
- Images: ``classes`` fixed random low-frequency templates, an image being its class's
  template plus white Gaussian noise of standard deviation ``noise``. The Bayes classifier
  (nearest template) errs with probability at most
  sum over other classes of Phi(-d_ij / (2 noise)) (a union bound, d_ij the distance between
  templates), so its accuracy is at least :attr:`ImageSource.bayes_accuracy_floor`; the
  target accuracy is stated below that floor.
- Real images: scikit-learn's handwritten digits (1797 8 x 8 images of 10 classes, shipped
  inside the package), each pixel blown up to a block at the model's resolution; the last
  360 are the held-out split. Its floor is not known exactly; simple classifiers exceed
  0.95 on it, so the target of 0.90 is attainable.

The arrays are made here, where they can be checked; the framework backend only wraps them
in tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelbench.errors import ConfigError

#: Held-out images of the digits (the rest are trained on).
DIGITS_HELD_OUT = 360


@dataclass(frozen=True, slots=True)
class MarkovSource:
    """A random Markov chain over token ids ``0 .. states-1`` of a larger vocabulary."""

    transition: np.ndarray
    """(states, states) row-stochastic transition matrix."""
    seed: int

    @classmethod
    def make(cls, *, states: int, branching: int, seed: int) -> MarkovSource:
        """A chain whose every state has ``branching`` successors, chosen at random."""
        if not 1 <= branching <= states:
            raise ValueError(f"branching must be in 1..{states}, got {branching}")
        rng = np.random.default_rng(seed)
        p = np.zeros((states, states))
        for i in range(states):
            succ = rng.choice(states, size=branching, replace=False)
            p[i, succ] = rng.dirichlet(np.ones(branching))
        return cls(transition=p, seed=seed)

    @property
    def stationary(self) -> np.ndarray:
        """The stationary distribution (left eigenvector of eigenvalue 1, normalised)."""
        vals, vecs = np.linalg.eig(self.transition.T)
        v = np.real(vecs[:, np.argmin(np.abs(vals - 1))])
        return v / v.sum()

    @property
    def entropy_rate(self) -> float:
        """H in nats per token: the floor of a next-token cross entropy on this source."""
        p = self.transition
        with np.errstate(divide="ignore", invalid="ignore"):
            row = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        return float(self.stationary @ row)

    def k_step_entropy(self, k: int) -> float:
        """H(x_t | x_{t-k}) in nats: the entropy rate for k = 1; for k = 0 the stationary
        law's entropy H(x_t). By stationarity it is also H(x_t | x_{t+k})."""
        if k <= 0:
            pi = self.stationary.clip(1e-300)
            return float(-(pi * np.log(pi)).sum())
        p = np.linalg.matrix_power(self.transition, k)
        with np.errstate(divide="ignore", invalid="ignore"):
            row = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        return float(self.stationary @ row)

    def masked_floor(self, *, length: int, fraction: float, draws: int = 4000,
                     seed: int = 0) -> float:
        """An upper bound (nats) on the lowest mean cross entropy of masked-token prediction
        on windows of ``length`` tokens, each masked with probability ``fraction`` and the
        first always (BERT's batches here, :mod:`accelbench.data.transforms`).

        A masked token x_t is predicted from every unmasked token; conditioning on less
        cannot lower the entropy, so its floor is at most H(x_t | x_s) for the nearest
        unmasked x_s, k = |t - s| steps away (the left one, else the right one; H(x_t)
        when none is): :meth:`k_step_entropy`. The batch's loss is the mean over its
        masked tokens, so the bound is the expected sum over masked tokens divided by the
        expected count, averaged over ``draws`` masks drawn with ``seed``.
        """
        rng = np.random.default_rng(seed)
        masks = rng.random((draws, length)) < fraction
        masks[:, 0] = True
        cache: dict[int, float] = {}
        total, count = 0.0, 0
        for mask in masks:
            free = np.flatnonzero(~mask)
            for t in np.flatnonzero(mask):
                left = free[free < t]
                right = free[free > t]
                k = int(t - left[-1]) if left.size else int(right[0] - t) if right.size else 0
                if k not in cache:
                    cache[k] = self.k_step_entropy(k)
                total += cache[k]
                count += 1
        return total / count

    def sample(self, rows: int, length: int, rng: np.random.Generator) -> np.ndarray:
        """(rows, length) int64 token sequences, each starting from the stationary law."""
        states = self.transition.shape[0]
        cum = np.cumsum(self.transition, axis=1)
        out = np.empty((rows, length), dtype=np.int64)
        out[:, 0] = rng.choice(states, size=rows, p=self.stationary.clip(0))
        for t in range(1, length):
            u = rng.random(rows)[:, None]
            out[:, t] = np.minimum((u > cum[out[:, t - 1]]).sum(axis=1), states - 1)
        return out


def _smooth_noise(rng: np.random.Generator, shape: tuple[int, int, int], cells: int) -> np.ndarray:
    """Random values on a coarse ``cells`` x ``cells`` grid, repeated up to the image size."""
    channels, side, _ = shape
    coarse = rng.standard_normal((channels, cells, cells))
    reps = math.ceil(side / cells)
    return np.kron(coarse, np.ones((reps, reps)))[:, :side, :side]


@dataclass(frozen=True, slots=True)
class ImageSource:
    """Class-conditional images: template of the class plus Gaussian noise."""

    templates: np.ndarray
    """(classes, 3, side, side) float32, each of unit RMS."""
    noise: float
    seed: int

    @classmethod
    def make(cls, *, classes: int, side: int, noise: float, seed: int) -> ImageSource:
        """``classes`` smooth random templates (4 x 4 blocks of colour) of unit RMS."""
        rng = np.random.default_rng(seed)
        t = np.stack([_smooth_noise(rng, (3, side, side), 4) for _ in range(classes)])
        t /= np.sqrt((t**2).mean(axis=(1, 2, 3), keepdims=True))
        return cls(templates=t.astype(np.float32), noise=noise, seed=seed)

    @property
    def bayes_accuracy_floor(self) -> float:
        """A lower bound on the accuracy of the best classifier (union bound, see module)."""
        flat = self.templates.reshape(len(self.templates), -1).astype(np.float64)
        d = np.sqrt(((flat[:, None, :] - flat[None, :, :]) ** 2).sum(axis=2))
        err = [sum(0.5 * math.erfc(d[i, j] / (2 * self.noise) / math.sqrt(2))
                   for j in range(len(flat)) if j != i) for i in range(len(flat))]
        return max(0.0, 1.0 - float(np.mean(err)))

    def sample(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(images (count, 3, side, side) float32, labels (count,) int64), classes uniform."""
        labels = rng.integers(0, len(self.templates), size=count)
        noise = rng.standard_normal((count, *self.templates.shape[1:])).astype(np.float32)
        return self.templates[labels] + self.noise * noise, labels.astype(np.int64)


@dataclass(frozen=True, slots=True)
class DigitsSource:
    """scikit-learn's handwritten digits at ``side`` x ``side`` x 3, split train/held-out."""

    train_x: np.ndarray
    train_y: np.ndarray
    held_x: np.ndarray
    held_y: np.ndarray

    @classmethod
    def load(cls, *, side: int) -> DigitsSource:
        """The digits, each 8 x 8 image's pixels repeated up to ``side`` (a multiple of 8),
        scaled to zero mean and unit variance, in 3 identical channels."""
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            raise ConfigError("--data digits needs scikit-learn: pip install "
                              "'accelbench[digits]'") from None
        if side % 8:
            raise ConfigError(f"--data digits needs an image side that is a multiple of 8, "
                              f"the model's is {side}")
        d = load_digits()
        x = np.kron(d.images.astype(np.float32), np.ones((side // 8, side // 8), np.float32))
        x = (x - x.mean()) / x.std()
        x = np.repeat(x[:, None], 3, axis=1)
        y = d.target.astype(np.int64)
        n = len(y) - DIGITS_HELD_OUT
        return cls(train_x=x[:n], train_y=y[:n], held_x=x[n:], held_y=y[n:])

    def sample(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` training images drawn with replacement, and their labels."""
        idx = rng.integers(0, len(self.train_y), size=count)
        return self.train_x[idx], self.train_y[idx]


def greedy_ctc(steps: list[int], blank: int = 0) -> list[int]:
    """CTC's greedy decoding of one utterance's best symbol per step: repeats merged,
    blanks dropped."""
    out: list[int] = []
    prev = None
    for s in steps:
        if s != prev and s != blank:
            out.append(s)
        prev = s
    return out


def edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein distance: insertions, deletions and substitutions to turn a into b."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        new = [i]
        for j, y in enumerate(b, 1):
            new.append(min(row[j] + 1, new[j - 1] + 1, row[j - 1] + (x != y)))
        row = new
    return row[-1]


def character_error_rate(hyps: list[list[int]], refs: list[list[int]]) -> float:
    """Edits over reference characters, summed over utterances (the corpus CER)."""
    edits = sum(edit_distance(h, r) for h, r in zip(hyps, refs, strict=True))
    return edits / max(1, sum(len(r) for r in refs))
