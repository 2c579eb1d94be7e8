"""HELR-style logistic regression trained on encrypted data (Kim, Song, Kim, Lee, Cheon 2018).

The client standardizes its data, folds the labels in (``Z_i = y_i x_i`` with ``y`` in {-1, 1}), packs the
samples row by row into the slots of one ciphertext and sends it with the secret-free evaluation keys. The
server runs a fixed number of (Nesterov-accelerated) gradient-ascent steps on the log-likelihood with the
sigmoid replaced by a least-squares odd polynomial, all on ciphertexts, and returns encrypted weights; it can
also score encrypted test samples with them. Without bootstrapping the iteration count is bounded by the depth
of the parameter set (:meth:`LogRegSpec.recommended_parameters` picks a 128-bit set that holds it); the
bootstrapping mode (:func:`bootstrap_parameters`, :func:`schedule_bootstrapping`,
:func:`train_encrypted_bootstrapped`, see ``hemx.apps._logreg_bootstrap``) refreshes the weights and the
Nesterov vector when their levels run out, so any number of iterations fits.

Mini-batches (HELR at scale): ``plan(..., batch_size=b)`` splits the samples into consecutive batches of ``b``, one
ciphertext each (:func:`pack_training_batches`); iteration ``t`` uses batch ``t mod n_batches``, in every circuit and
reference alike. :data:`PRESETS` name two runs of the same code: "small" (the breast-cancer run of :func:`run`) and
"helr" (Fashion-MNIST two-class at 14x14, :func:`load_fashion_mnist`: 16,384 samples in 128 batches of 128 on the
128-bit ``boot_16``, 14 bootstrapped iterations); :func:`run_preset` runs one end to end (``hemx bench helr``).

Client side: :func:`load_data`, :func:`plan`, :func:`pack_training`, :func:`pack_test`, :func:`unpack_weights`,
:func:`unpack_scores`. Server side (a :class:`~hemx.ckks.Context` and
:class:`~hemx.ckks.EvaluationKeys` only): :func:`train_encrypted`, :func:`predict_encrypted`. References:
:func:`train_plaintext` (the same algorithm in textbook numpy form) and :func:`simulate_training` (the packed
circuit on numpy slot vectors). :func:`run` does everything and reports accuracy, errors, timings and sizes.

Depth per iteration (degree-3 sigmoid): 1 (inner products) + 2 (masked polynomial) + 1 (times the data) = 4;
the first iteration starts from zero weights and costs no level; inference costs 1.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import jax
import numpy as np

from hemx.apps import _logreg_bootstrap as _boot
from hemx.apps import _logreg_circuit as circuit
from hemx.apps._logreg_data import Dataset, load_data, load_fashion_mnist
from hemx.apps._logreg_layout import Layout, next_power_of_two
from hemx.apps._logreg_sigmoid import SigmoidPoly, fit_sigmoid, sigmoid
from hemx.circuits import CKKSEvaluator, SlotSimulator
from hemx.ckks import CKKSParameters, Ciphertext, Context, EvaluationKeys, Sampler, max_log_qp
from hemx.errors import LevelError, MissingKeyError, ParameterError, ShapeError, SlotError
from hemx.kernels import automorphism

__all__ = [
    "Dataset", "SigmoidPoly", "LogRegSpec", "PlaintextModel", "LogRegReport", "load_data", "fit_sigmoid",
    "sigmoid", "nesterov_gammas", "plan", "signed_samples", "pack_training", "pack_test", "unpack_weights",
    "unpack_scores",
    "train_plaintext", "simulate_training", "train_encrypted", "predict_encrypted", "accuracy", "run",
    "BootstrapSchedule", "BootstrapLog", "bootstrap_parameters", "schedule_bootstrapping",
    "simulate_training_bootstrapped", "train_encrypted_bootstrapped", "insecure_note",
    "load_fashion_mnist", "pack_training_batches", "auc", "Preset", "PRESETS", "run_preset",
]

# bootstrapping mode (hemx.apps._logreg_bootstrap): any number of iterations
BootstrapSchedule = _boot.Schedule
BootstrapLog = _boot.BootstrapLog
bootstrap_parameters = _boot.bootstrap_parameters
insecure_note = _boot.insecure_note
BOOTSTRAP_LEARNING_RATE = _boot.LEARNING_RATE
BOOTSTRAP_BOUND = _boot.BOUND

PRIME_BITS = 31  # one prime per level: scale 2^31 with hemx's 31-bit words
BASE_BITS = (31, 31)  # the base holds scale * |score| at level 0 with room to spare
MAX_DNUM = 8  # beyond it keys grow (dnum * (L + alpha) polynomials each) and key switching slows: use a larger ring
DEFAULT_ITERATIONS = 5
DEFAULT_LEARNING_RATE = 3.0
DEFAULT_DEGREE = 3
DEFAULT_BOUND = 10.0

Progress = Callable[[str, int, int], None]


def nesterov_gammas(iterations: int) -> tuple[float, ...]:
    """Nesterov's momentum weights ``gamma_0 .. gamma_{T-1}`` (``gamma_0 = 0``, then negative).

    ``lambda_0 = 1``, ``lambda_{t+1} = (1 + sqrt(1 + 4 lambda_t^2)) / 2``, ``gamma_t = (1 - lambda_t) /
    lambda_{t+1}``; the update is ``v_{t+1} = (1 - gamma_t) w_{t+1} + gamma_t w_t``.
    """
    out, lam = [], 1.0
    for _ in range(int(iterations)):
        nxt = (1.0 + math.sqrt(1.0 + 4.0 * lam * lam)) / 2.0
        out.append((1.0 - lam) / nxt)
        lam = nxt
    return tuple(out)


# ------------------------------------------------------------------------------------------------------------
# the plan
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LogRegSpec:
    """Everything both sides agree on: data shape, layout, schedule, sigmoid polynomial.

    Attributes:
        n_samples: training samples (all mini-batches together).
        n_features: features per sample, the bias column included.
        layout: the slot layout (rows x cols, cols a power of two >= n_features; rows >= :attr:`batch_size`).
        iterations: gradient steps T (>= 1).
        learning_rate: step size lr of ``w + lr * mean_i sigma(-z_i) y_i x_i`` (the mean over the mini-batch).
        nesterov: Nesterov acceleration (costs no depth here).
        sigmoid: the polynomial standing in for the sigmoid.
        n_batches: mini-batches: consecutive blocks of :attr:`batch_size` samples, one ciphertext each; iteration
            ``t`` uses batch ``t mod n_batches`` (1: full-batch gradient ascent on one ciphertext).
    """

    n_samples: int
    n_features: int
    layout: Layout
    iterations: int
    learning_rate: float
    nesterov: bool
    sigmoid: SigmoidPoly
    n_batches: int = 1

    @property
    def batch_size(self) -> int:
        """Samples per mini-batch (per ciphertext)."""
        return self.n_samples // self.n_batches

    def batch_of(self, iteration: int) -> int:
        """The mini-batch iteration ``iteration`` (0-based) uses."""
        return int(iteration) % self.n_batches

    @property
    def slots(self) -> int:
        return self.layout.slots

    @property
    def kappa(self) -> float:
        """Data are packed times ``kappa = sqrt(lr / b)`` (``b`` the batch size), weights kept divided by it (see
        the circuit)."""
        return math.sqrt(self.learning_rate / self.batch_size)

    @property
    def gammas(self) -> tuple[float, ...]:
        return nesterov_gammas(self.iterations) if self.nesterov else (0.0,) * self.iterations

    @property
    def depth_per_iteration(self) -> int:
        """Levels of one full iteration: inner product, polynomial (1 + bit_length((d-1)/2)), data product."""
        return 3 + ((self.sigmoid.degree - 1) // 2).bit_length()

    @property
    def training_depth(self) -> int:
        """Levels training consumes: iteration 0 is free (zero weights); T = 1 costs one (the 1/2 factor)."""
        return 1 if self.iterations == 1 else (self.iterations - 1) * self.depth_per_iteration

    @property
    def inference_depth(self) -> int:
        return 1

    @property
    def levels_needed(self) -> int:
        """Levels a fresh ciphertext needs for training and then inference with the trained weights."""
        return self.training_depth + self.inference_depth

    @property
    def rotation_steps(self) -> tuple[int, ...]:
        """The Galois keys to generate (``ctx.keygen(rotations=spec.rotation_steps)``)."""
        return self.layout.rotation_steps

    def recommended_parameters(self, *, log_n: int | None = None, allow_insecure: bool = False,
                               dnum: int | None = None) -> CKKSParameters:
        """The smallest ring (then fewest key-switching digits, at most ``MAX_DNUM``) that holds
        :attr:`levels_needed` at 128 bits.

        One 31-bit prime per level (scale 2^31), a base of two 31-bit primes, 31-bit special primes. With
        ``log_n`` (and ``allow_insecure=True`` for rings below the bound, e.g. in tests) the ring is fixed.
        Raises ``ParameterError`` when no ring up to 2^16 holds the depth (use fewer iterations).
        """
        limbs = len(BASE_BITS) + self.levels_needed
        smallest = max(2 * self.slots, 1 << 10).bit_length() - 1
        rings = [int(log_n)] if log_n is not None else list(range(smallest, 17))
        for ln in rings:
            if (1 << ln) // 2 < self.slots:
                raise SlotError(f"N = 2^{ln} has {(1 << ln) // 2} slots; the layout needs {self.slots}")
            chosen = dnum if dnum is not None else _smallest_secure_dnum(1 << ln, limbs)
            if chosen is None and allow_insecure:
                chosen = min(3, limbs)
            if chosen is None:
                continue
            return CKKSParameters.create(
                ln, levels=self.levels_needed, primes_per_level=1, prime_bits=PRIME_BITS, base_bits=BASE_BITS,
                special_bits=PRIME_BITS, dnum=int(chosen), allow_insecure=allow_insecure, name="logreg",
            )
        raise ParameterError(
            f"{self.iterations} iterations need {self.levels_needed} levels ({limbs} limbs of {PRIME_BITS} bits); "
            "no ring up to N = 2^16 holds them at 128-bit security. Use fewer iterations, the bootstrapping "
            "mode (bootstrap_parameters, train_encrypted_bootstrapped) or pass allow_insecure=True for experiments."
        )

    def describe(self) -> str:
        nag = "Nesterov" if self.nesterov else "plain"
        batches = (f" ({self.n_batches} mini-batches of {self.batch_size}, one ciphertext each)"
                   if self.n_batches > 1 else "")
        return (f"{self.n_samples} samples{batches} x {self.n_features} features in {self.layout.rows} x "
                f"{self.layout.cols} slots; {self.iterations} {nag} iterations, lr {self.learning_rate:g}; "
                f"sigmoid degree {self.sigmoid.degree} on [-{self.sigmoid.bound:g}, {self.sigmoid.bound:g}]; "
                f"depth {self.training_depth} + {self.inference_depth}; {len(self.rotation_steps)} rotation keys")


def _smallest_secure_dnum(n: int, limbs: int) -> int | None:
    """Fewest digits (at most MAX_DNUM) whose special primes keep log QP within the 128-bit bound (primes
    counted as 31 bits); None when there is none."""
    bound = max_log_qp(n)
    if bound is None:
        return None
    for dnum in range(1, min(limbs, MAX_DNUM) + 1):
        alpha = -(-limbs // dnum)
        if PRIME_BITS * (limbs + alpha) <= bound:
            return dnum
    return None


def plan(
    n_samples: int,
    n_features: int,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    nesterov: bool = True,
    degree: int = DEFAULT_DEGREE,
    bound: float = DEFAULT_BOUND,
    slots: int | None = None,
    batch_size: int | None = None,
) -> LogRegSpec:
    """Fix the layout and schedule for ``n_samples`` training samples of ``n_features`` (bias included).

    ``batch_size`` (a divisor of ``n_samples``; default ``n_samples``, one batch) splits the samples into
    ``n_samples / batch_size`` mini-batches of consecutive samples, one ciphertext each, used in turn.
    ``slots`` defaults to the smallest power of two holding a batch; pass the context's slot count to
    use a given context (then ``slots / cols`` rows must hold a batch).
    """
    if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ParameterError(f"n_samples must be a positive integer, got {n_samples!r}")
    if not isinstance(n_features, (int, np.integer)) or n_features < 1:
        raise ParameterError(f"n_features must be a positive integer, got {n_features!r}")
    if not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise ParameterError(f"iterations must be a positive integer, got {iterations!r}")
    if not math.isfinite(learning_rate) or learning_rate <= 0:
        raise ParameterError(f"learning_rate must be positive, got {learning_rate!r}")
    if batch_size is None:
        batch_size = n_samples
    if (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or not 1 <= batch_size
            or n_samples % batch_size):
        raise ParameterError(f"batch_size must be a positive divisor of n_samples = {n_samples}, got {batch_size!r} "
                             "(drop samples so that the batches are equal)")
    cols = next_power_of_two(n_features)
    if slots is None:
        slots = next_power_of_two(batch_size) * cols
    layout = Layout.for_slots(int(slots), int(n_features))
    if layout.rows < batch_size:
        what = "samples" if batch_size == n_samples else "samples per batch"
        raise SlotError(f"{batch_size} {what} need {batch_size} rows of {cols} slots; {slots} slots hold "
                        f"{layout.rows}. Use a larger ring (or fewer {what}).")
    return LogRegSpec(int(n_samples), int(n_features), layout, int(iterations), float(learning_rate),
                      bool(nesterov), fit_sigmoid(degree, bound), int(n_samples // batch_size))


# ------------------------------------------------------------------------------------------------------------
# client-side packing
# ------------------------------------------------------------------------------------------------------------


def _check_xy(x: np.ndarray, y: np.ndarray | None, spec: LogRegSpec, training: bool):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != spec.n_features:
        raise ShapeError(f"expected samples of shape (n, {spec.n_features}), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ParameterError("the samples contain NaN or infinite values")
    if training and x.shape[0] != spec.n_samples:
        raise ShapeError(f"the plan is for {spec.n_samples} training samples, got {x.shape[0]}")
    if y is None:
        return x, None
    y = np.asarray(y)
    if y.shape != (x.shape[0],):
        raise ShapeError(f"expected {x.shape[0]} labels, got shape {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ParameterError("labels must be 0 or 1")
    return x, y.astype(np.int64)


def signed_samples(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Z = y' * x`` with ``y' = 2 y - 1`` in {-1, 1}: float64 ``(n, d)``."""
    return (2.0 * np.asarray(y, dtype=np.float64) - 1.0)[:, None] * np.asarray(x, dtype=np.float64)


def pack_training(x: np.ndarray, y: np.ndarray, spec: LogRegSpec) -> np.ndarray:
    """Client: ``kappa * y' x`` packed row by row: float64 ``(slots,)`` (encrypt it with ``ctx.encrypt``); for a
    plan of one batch (see :func:`pack_training_batches` for mini-batches)."""
    if spec.n_batches != 1:
        raise ShapeError(f"the plan has {spec.n_batches} mini-batches: pack them with pack_training_batches")
    return pack_training_batches(x, y, spec)[0]


def pack_training_batches(x: np.ndarray, y: np.ndarray, spec: LogRegSpec) -> np.ndarray:
    """Client: the mini-batches, ``kappa * y' x`` of samples ``[k b, (k + 1) b)`` packed row by row in row ``k``:
    float64 ``(n_batches, slots)`` (encrypt each row: one ciphertext per mini-batch)."""
    x, y = _check_xy(x, y, spec, training=True)
    scaled = spec.kappa * signed_samples(x, y)
    b = spec.batch_size
    return np.stack([spec.layout.pack(scaled[k * b : (k + 1) * b]) for k in range(spec.n_batches)])


def pack_test(x: np.ndarray, spec: LogRegSpec) -> np.ndarray:
    """Client: test samples times ``kappa`` in blocks of ``rows``: float64 ``(B, slots)``."""
    x, _ = _check_xy(x, None, spec, training=False)
    return spec.layout.pack_batches(spec.kappa * x)


def unpack_weights(values: np.ndarray, spec: LogRegSpec) -> np.ndarray:
    """Client: decrypted weight slots ``(slots,)`` -> weights ``(n_features,)`` (row 0, times kappa)."""
    return spec.kappa * spec.layout.first_row(values, spec.n_features)


def unpack_scores(values: np.ndarray, spec: LogRegSpec, count: int) -> np.ndarray:
    """Client: decrypted scores ``(B, slots)`` -> ``<x_i, w>`` for the first ``count`` samples ``(count,)``."""
    return spec.layout.first_column(values, count)


def accuracy(scores: np.ndarray, y: np.ndarray) -> float:
    """Fraction of samples whose predicted class (score > 0) equals the label."""
    return float(np.mean((np.asarray(scores) > 0).astype(np.int64) == np.asarray(y)))


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` ``(n,)`` for labels ``y`` ``(n,)`` in {0, 1}: the probability that a
    positive sample scores above a negative one (ties count one half), from the ranks (Mann-Whitney)."""
    scores, y = np.asarray(scores, dtype=np.float64), np.asarray(y)
    if scores.shape != y.shape or scores.ndim != 1:
        raise ShapeError(f"expected scores and labels of one shape (n,), got {scores.shape} and {y.shape}")
    positives, negatives = int(np.sum(y == 1)), int(np.sum(y == 0))
    if positives == 0 or negatives == 0 or positives + negatives != len(y):
        raise ParameterError("the AUC needs labels in {0, 1} with both classes present")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]  # 1-based ranks, ties get their mean rank
    return float((ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


# ------------------------------------------------------------------------------------------------------------
# references
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlaintextModel:
    """Result of :func:`train_plaintext`: ``weights`` float64 ``(d,)`` and the largest ``|z_i|`` met."""

    weights: np.ndarray
    max_abs_z: float


def train_plaintext(x: np.ndarray, y: np.ndarray, spec: LogRegSpec) -> PlaintextModel:
    """The same algorithm in textbook numpy form (no packing): same polynomial, steps, momentum and mini-batches.

    ``w_0 = v_0 = 0``; ``z = Z_B v_t`` with ``Z_B`` the rows of mini-batch ``B = t mod n_batches``;
    ``w_{t+1} = v_t + lr * mean_{i in B} p(-z_i) Z_i``; ``v_{t+1} = (1 - gamma_t) w_{t+1} + gamma_t w_t``;
    returns ``w_T``.
    """
    x, y = _check_xy(x, y, spec, training=True)
    signed = signed_samples(x, y)
    w = np.zeros(spec.n_features)
    v = np.zeros(spec.n_features)
    largest = 0.0
    for t, gamma in enumerate(spec.gammas):
        start = spec.batch_of(t) * spec.batch_size
        z_mat = signed[start : start + spec.batch_size]
        z = z_mat @ v
        largest = max(largest, float(np.max(np.abs(z))))
        step = spec.learning_rate * np.mean(spec.sigmoid(-z)[:, None] * z_mat, axis=0)
        w_next = v + step
        v = (1.0 - gamma) * w_next + gamma * w
        w = w_next
    return PlaintextModel(w, largest)


def simulate_training(x: np.ndarray, y: np.ndarray, spec: LogRegSpec) -> np.ndarray:
    """The packed circuit on numpy slot vectors (:class:`hemx.circuits.SlotSimulator` in its exact mode:
    ``numpy.roll`` rotations, CKKS's level accounting from ``spec.levels_needed``): weights float64 ``(d,)``."""
    ev = SlotSimulator(None, slots=spec.slots, max_level=spec.levels_needed)
    batches = [ev.encrypt(row) for row in pack_training_batches(x, y, spec)]
    out = circuit.train(ev, batches, gammas=spec.gammas, poly=spec.sigmoid,
                        layout=spec.layout)
    return unpack_weights(ev.decrypt(out), spec)


# ------------------------------------------------------------------------------------------------------------
# server side
# ------------------------------------------------------------------------------------------------------------


def _check_server_inputs(ctx: Context, keys: EvaluationKeys, spec: LogRegSpec, ct: Ciphertext, what: str,
                         need_levels: int) -> None:
    if not isinstance(ctx, Context):
        raise ParameterError("expected a hemx Context")
    if not isinstance(keys, EvaluationKeys):
        raise ParameterError("expected the EvaluationKeys (keys.evaluation_keys()) from the client")
    if not isinstance(spec, LogRegSpec):
        raise ParameterError("expected the LogRegSpec from hemx.apps.logreg.plan")
    if not isinstance(ct, Ciphertext):
        raise ParameterError(f"the {what} must be a hemx Ciphertext, got {type(ct).__name__}")
    if ct.slots != spec.slots:
        raise SlotError(f"the {what} has {ct.slots} slots, the plan's layout {spec.slots}; create the context "
                        f"with Context(params, slots={spec.slots})")
    if ct.level < need_levels:
        raise LevelError(f"the {what} is at level {ct.level}; this step needs {need_levels} levels. Use "
                         "spec.recommended_parameters() (or fewer iterations)")
    missing = [s for s in spec.rotation_steps
               if automorphism.galois_element(ctx.params.n, s % spec.slots) not in keys.galois]
    if missing:
        raise MissingKeyError(f"no Galois keys for rotations {missing}; generate the keys with "
                              "ctx.keygen(rotations=spec.rotation_steps)")
    keys.relin_key()  # raises MissingKeyError when absent


def _training_batches(ctx: Context, eval_keys: EvaluationKeys, spec: LogRegSpec, ct_data, need_levels: int) -> list:
    """The training ciphertexts as a list of ``spec.n_batches`` checked mini-batches."""
    batches = list(ct_data) if isinstance(ct_data, (list, tuple)) else [ct_data]
    if len(batches) != spec.n_batches:
        raise ShapeError(f"the plan has {spec.n_batches} mini-batches; got {len(batches)} training ciphertexts "
                         "(one per row of pack_training_batches)")
    for k, ct in enumerate(batches):
        what = "training ciphertext" if spec.n_batches == 1 else f"training ciphertext {k}"
        _check_server_inputs(ctx, eval_keys, spec, ct, what, need_levels)
        if ct.batch_shape:
            raise ShapeError(f"each training mini-batch must be one ciphertext, got a batch of shape "
                             f"{ct.batch_shape}")
    return batches


def train_encrypted(ctx: Context, eval_keys: EvaluationKeys, ct_data, spec: LogRegSpec,
                    progress: Progress | None = None) -> Ciphertext:
    """Server: train on the encrypted packed data (:func:`pack_training`); returns the encrypted weights.

    Args:
        ct_data: one ciphertext (no batch axis) of ``spec.slots`` slots with ``spec.training_depth`` levels, or a
            list of ``spec.n_batches`` of them (:func:`pack_training_batches`; iteration ``t`` uses batch
            ``t mod n_batches``).
        progress: ``progress("train", t, T)`` after each iteration.

    Returns:
        ``w_T / kappa`` in every row (decrypt and :func:`unpack_weights`), ``spec.training_depth`` levels lower.
    """
    batches = _training_batches(ctx, eval_keys, spec, ct_data, spec.training_depth)
    ev = CKKSEvaluator(ctx, eval_keys)
    return circuit.train(ev, batches, gammas=spec.gammas, poly=spec.sigmoid, layout=spec.layout,
                         progress=progress)


def predict_encrypted(ctx: Context, eval_keys: EvaluationKeys, ct_weights: Ciphertext, ct_test: Ciphertext,
                      spec: LogRegSpec) -> Ciphertext:
    """Server: encrypted scores ``<x_i, w>`` of packed test samples (:func:`pack_test`), one level.

    Decrypt and :func:`unpack_scores`; the class is ``score > 0``, the probability ``sigmoid(score)``.
    """
    _check_server_inputs(ctx, eval_keys, spec, ct_weights, "weights ciphertext", spec.inference_depth)
    if not isinstance(ct_test, Ciphertext) or ct_test.slots != spec.slots:
        raise SlotError(f"the test ciphertext must be a Ciphertext of {spec.slots} slots")
    ev = CKKSEvaluator(ctx, eval_keys)
    return circuit.predict(ev, ct_weights, ct_test, spec.layout)


def schedule_bootstrapping(x: np.ndarray, y: np.ndarray, spec: LogRegSpec, params: CKKSParameters, *,
                           shrink: float | None = None) -> BootstrapSchedule:
    """Client: the bootstrapping schedule (state divisor ``shrink``, bootstrap iterations, levels) for training on
    ``(x, y)`` with ``params`` (:func:`bootstrap_parameters`). Checks on the exact slot simulator that the
    shrunk state stays in the bootstrap's range; raises ``ParameterError`` when it would not."""
    return _boot.schedule(pack_training_batches(x, y, spec), spec, params, shrink=shrink)


def simulate_training_bootstrapped(x: np.ndarray, y: np.ndarray, spec: LogRegSpec,
                                   plan: BootstrapSchedule) -> np.ndarray:
    """The packed, bootstrapped circuit on numpy slot vectors (exact simulator): weights float64 ``(d,)``."""
    return unpack_weights(_boot.simulate(pack_training_batches(x, y, spec), spec, plan), spec)


def train_encrypted_bootstrapped(ctx: Context, eval_keys: EvaluationKeys, ct_data, spec: LogRegSpec,
                                 plan: BootstrapSchedule, progress: Progress | None = None,
                                 log: BootstrapLog | None = None) -> Ciphertext:
    """Server: train for ``spec.iterations`` (any number) on ``ct_data`` (one ciphertext, or the list of
    ``spec.n_batches`` mini-batch ciphertexts), bootstrapping the weights and the Nesterov vector
    (one batch of two) at the iterations of ``plan``; returns ``w_T / kappa`` (decrypt and
    :func:`unpack_weights`) with at least one level left for :func:`predict_encrypted`.

    The keys must include the bootstrapping keys: ``ctx.keygen(rotations=spec.rotation_steps,
    bootstrap=hemx.circuits.bootstrap.bootstrapper_for(ctx))``.
    ``progress`` gets ("train", t, T) per iteration and ("bootstrap", k, K) per bootstrap; ``log`` (a
    :class:`BootstrapLog`) collects the bootstraps' iterations, seconds and levels.
    """
    if not isinstance(plan, BootstrapSchedule):
        raise ParameterError("expected the BootstrapSchedule from schedule_bootstrapping")
    batches = _training_batches(ctx, eval_keys, spec, ct_data, plan.top_level)
    return _boot.train_encrypted(ctx, eval_keys, batches, spec, plan, progress=progress, log=log)


# ------------------------------------------------------------------------------------------------------------
# the demo driver
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LogRegReport:
    """What :func:`run` measured. Times in seconds (wall clock, XLA compilation included), sizes in bytes.

    Attributes:
        accuracy_encrypted / accuracy_plaintext: test accuracy of the encrypted run and of
            :func:`train_plaintext` (same algorithm); ``accuracy_sklearn``: scikit-learn's converged
            LogisticRegression with the exact sigmoid, for orientation.
        prediction_agreement: fraction of test samples both runs classify alike.
        weight_error: max ``|w_encrypted - w_plaintext|``; ``score_error``: max ``|score_enc - X w_plain|``.
        max_abs_z: largest ``|z_i|`` the plaintext run met (compare with the sigmoid interval bound).
        timings: keygen, encrypt_train, train, iterations (list), encrypt_test, predict, decrypt, plaintext.
        sizes: train_ciphertext, test_ciphertext, weights_ciphertext, evaluation_keys (bytes), galois_keys.
    """

    spec: LogRegSpec
    parameters: str
    ntt: str
    n_train: int
    n_test: int
    accuracy_encrypted: float
    accuracy_plaintext: float
    accuracy_sklearn: float
    prediction_agreement: float
    weight_error: float
    score_error: float
    max_abs_z: float
    sigmoid_max_error: float
    weights_encrypted: np.ndarray
    weights_plaintext: np.ndarray
    timings: dict
    sizes: dict

    def to_dict(self) -> dict:
        """JSON-friendly summary."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["spec"] = self.spec.describe()
        out["weights_encrypted"] = [float(v) for v in self.weights_encrypted]
        out["weights_plaintext"] = [float(v) for v in self.weights_plaintext]
        return out


def _nbytes(*arrays) -> int:
    return int(sum(a.nbytes for a in arrays))


def _key_bytes(keys: EvaluationKeys) -> int:
    parts = [keys.public.data] + ([keys.relin.data] if keys.relin is not None else [])
    return _nbytes(*parts, *(k.data for k in keys.galois.values()))


def _sklearn_accuracy(data: Dataset) -> float:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(max_iter=5000, fit_intercept=False).fit(data.x_train, data.y_train)
    return float(model.score(data.x_test, data.y_test))


def run(
    *,
    iterations: int = DEFAULT_ITERATIONS,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    degree: int = DEFAULT_DEGREE,
    bound: float = DEFAULT_BOUND,
    nesterov: bool = True,
    data: Dataset | None = None,
    params: CKKSParameters | None = None,
    ntt: str | None = None,
    sampler: Sampler | None = None,
    progress: Progress | None = None,
) -> LogRegReport:
    """Train on the encrypted breast-cancer data, score the encrypted test set, compare with plaintext.

    Args:
        data: a :class:`Dataset` (default ``load_data()``: 455 training, 114 test samples, 31 columns).
        params: CKKS parameters (default ``spec.recommended_parameters()``, 128-bit).
        ntt: the context's NTT method (default: the context's own, the fastest exact one this machine has).
        sampler: randomness (default the OS CSPRNG).
        progress: ``progress(stage, done, total)`` with stages "keygen", "encrypt", "train" (per iteration),
            "predict", "decrypt".
    """
    report = progress or (lambda stage, done, total: None)
    data = data if data is not None else load_data()
    spec = plan(len(data.y_train), data.n_features, iterations=iterations, learning_rate=learning_rate,
                nesterov=nesterov, degree=degree, bound=bound)
    params = params if params is not None else spec.recommended_parameters()
    ctx = Context(params, slots=spec.slots, ntt=ntt, sampler=sampler)
    timings: dict = {}

    report("keygen", 0, 1)
    t0 = time.perf_counter()
    keys = ctx.keygen(rotations=spec.rotation_steps)
    jax.block_until_ready([k.data for k in keys.galois.values()])
    timings["keygen"] = time.perf_counter() - t0
    eval_keys = keys.evaluation_keys()
    report("keygen", 1, 1)

    report("encrypt", 0, 1)
    t0 = time.perf_counter()
    # the data owner holds the secret key: symmetric encryption adds far less fresh noise than public-key
    ct_data = ctx.encrypt(pack_training(data.x_train, data.y_train, spec), keys.secret)
    jax.block_until_ready(ct_data.data)
    timings["encrypt_train"] = time.perf_counter() - t0
    report("encrypt", 1, 1)

    marks = [time.perf_counter()]

    def on_iteration(stage: str, done: int, total: int) -> None:
        marks.append(time.perf_counter())
        report(stage, done, total)

    report("train", 0, spec.iterations)
    ct_w = train_encrypted(ctx, eval_keys, ct_data, spec, progress=on_iteration)
    timings["train"] = marks[-1] - marks[0]
    timings["iterations"] = [b - a for a, b in zip(marks, marks[1:])]

    report("predict", 0, 1)
    t0 = time.perf_counter()
    ct_test = ctx.encrypt(pack_test(data.x_test, spec), keys.secret)
    jax.block_until_ready(ct_test.data)
    timings["encrypt_test"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ct_scores = predict_encrypted(ctx, eval_keys, ct_w, ct_test, spec)
    jax.block_until_ready(ct_scores.data)
    timings["predict"] = time.perf_counter() - t0
    report("predict", 1, 1)

    report("decrypt", 0, 1)
    t0 = time.perf_counter()
    w_enc = unpack_weights(ctx.decrypt(ct_w, keys.secret), spec)
    scores_enc = unpack_scores(ctx.decrypt(ct_scores, keys.secret), spec, len(data.y_test))
    timings["decrypt"] = time.perf_counter() - t0
    report("decrypt", 1, 1)

    t0 = time.perf_counter()
    reference = train_plaintext(data.x_train, data.y_train, spec)
    timings["plaintext"] = time.perf_counter() - t0
    scores_plain = data.x_test @ reference.weights

    sizes = {
        "train_ciphertext": _nbytes(ct_data.data),
        "test_ciphertext": _nbytes(ct_test.data),
        "weights_ciphertext": _nbytes(ct_w.data),
        "evaluation_keys": _key_bytes(eval_keys),
        "galois_keys": len(eval_keys.galois),
    }
    return LogRegReport(
        spec=spec,
        parameters=params.describe(),
        ntt=ntt,
        n_train=len(data.y_train),
        n_test=len(data.y_test),
        accuracy_encrypted=accuracy(scores_enc, data.y_test),
        accuracy_plaintext=accuracy(scores_plain, data.y_test),
        accuracy_sklearn=_sklearn_accuracy(data),
        prediction_agreement=float(np.mean((scores_enc > 0) == (scores_plain > 0))),
        weight_error=float(np.max(np.abs(w_enc - reference.weights))),
        score_error=float(np.max(np.abs(scores_enc - scores_plain))),
        max_abs_z=reference.max_abs_z,
        sigmoid_max_error=spec.sigmoid.max_error(),
        weights_encrypted=w_enc,
        weights_plaintext=reference.weights,
        timings=timings,
        sizes=sizes,
    )


# ------------------------------------------------------------------------------------------------------------
# presets: the breast-cancer run and HELR at scale (Fashion-MNIST, mini-batches, bootstrapping at boot_16)
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named training configuration for :func:`run_preset`.

    Attributes:
        name: "small" or "helr".
        dataset: "breast-cancer" (:func:`load_data`) or "fashion-mnist" (:func:`load_fashion_mnist`).
        n_train: training samples (None: the whole training split).
        batch_size: samples per mini-batch and ciphertext (None: one batch of all samples).
        iterations, learning_rate, degree, bound: as for :func:`plan`.
        bootstrap: train with bootstrapping (:func:`train_encrypted_bootstrapped`) on the 128-bit ``boot_16``;
            otherwise depth-bounded on :meth:`LogRegSpec.recommended_parameters` (128-bit).
    """

    name: str
    dataset: str
    n_train: int | None
    batch_size: int | None
    iterations: int
    learning_rate: float
    degree: int
    bound: float
    bootstrap: bool

    def load(self, n_train: int | None = None) -> Dataset:
        """The preset's data (``n_train`` overrides its sample count)."""
        count = self.n_train if n_train is None else n_train
        if self.dataset == "fashion-mnist":
            return load_fashion_mnist(n_train=count)
        return load_data(n_train=count)


PRESETS = {
    # the breast-cancer run of :func:`run`: 455 samples in one ciphertext, 5 iterations, N = 2^15
    "small": Preset("small", "breast-cancer", None, None, DEFAULT_ITERATIONS, DEFAULT_LEARNING_RATE, DEFAULT_DEGREE,
                    DEFAULT_BOUND, bootstrap=False),
    # HELR at scale: 16,384 Fashion-MNIST samples (196 pixels + bias in 256 slots each) in 128 mini-batches of 128,
    # one N = 2^16 ciphertext each (2^15 slots); 14 Nesterov iterations with the degree-3 sigmoid on [-8, 8] and
    # lr 2 (|z| stays below 5.5; lr 3 or more leaves the interval); bootstrapped on boot_16
    "helr": Preset("helr", "fashion-mnist", 16384, 128, 14, 2.0, 3, 8.0, bootstrap=True),
}


def _tree_bytes(tree) -> int:
    return int(sum(int(leaf.nbytes) for leaf in jax.tree_util.tree_leaves(tree)))


def run_preset(
    preset: str = "helr",
    *,
    iterations: int | None = None,
    n_train: int | None = None,
    data: Dataset | None = None,
    ntt: str | None = None,
    sampler: Sampler | None = None,
    progress: Progress | None = None,
) -> dict:
    """Run a preset (:data:`PRESETS`) end to end: data, plan, 128-bit parameters, keys, the mini-batches
    encrypted (client), training on them (server, bootstrapped for "helr"), the weights decrypted, and the same
    algorithm in float64 on the same mini-batches (:func:`train_plaintext`).

    Args:
        iterations, n_train: override the preset's (``n_train`` a multiple of its batch size).
        data: use this :class:`Dataset` instead of loading the preset's.
        progress: ``progress(stage, done, total)``: "keygen", "encrypt" (per batch), "bootstrap", "train".

    Returns:
        a JSON-friendly dict: ``spec``, ``parameters``, ``security``, ``samples``, ``batch_size``, ``n_batches``,
        ``batches_used``, ``iterations``, ``seconds`` (schedule, keygen, encrypt, train, plaintext),
        ``iteration_s`` (each, bootstraps included), ``ms_per_iteration``, ``bootstraps``, ``bootstrap_at``,
        ``bootstrap_s``, ``shrink``, ``keys`` (count, bytes), ``data_bytes``, ``accuracy``/``auc`` (encrypted,
        float64), ``agreement``, ``weight_error``, ``max_abs_weight``, ``max_abs_z``, ``sigmoid_bound``.
    """
    from hemx.circuits.bootstrap import bootstrapper_for

    if preset not in PRESETS:
        raise ParameterError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    cfg = PRESETS[preset]
    report = progress or (lambda stage, done, total: None)
    data = data if data is not None else cfg.load(n_train)
    count = len(data.y_train) if n_train is None else int(n_train)
    steps = cfg.iterations if iterations is None else iterations
    spec = plan(count, data.n_features, iterations=steps, learning_rate=cfg.learning_rate, degree=cfg.degree,
                bound=cfg.bound, batch_size=cfg.batch_size if cfg.batch_size is not None else count)
    seconds: dict = {}
    t0 = time.perf_counter()
    if cfg.bootstrap:
        params = bootstrap_parameters(spec, secure=True)
        schedule = schedule_bootstrapping(data.x_train, data.y_train, spec, params)
        data_level = schedule.top_level
    else:
        params, schedule = spec.recommended_parameters(), None
        data_level = params.max_level
    seconds["schedule"] = time.perf_counter() - t0
    ctx = Context(params, slots=spec.slots, ntt=ntt, sampler=sampler)

    report("keygen", 0, 1)
    t0 = time.perf_counter()
    keys = ctx.keygen(rotations=spec.rotation_steps, bootstrap=bootstrapper_for(ctx) if cfg.bootstrap else None)
    eval_keys = keys.evaluation_keys()
    jax.block_until_ready(jax.tree_util.tree_leaves(eval_keys))
    seconds["keygen"] = time.perf_counter() - t0
    report("keygen", 1, 1)

    # the client encrypts every mini-batch (symmetric: it holds the secret) and sends it at the level training
    # starts from
    packed = pack_training_batches(data.x_train, data.y_train, spec)
    t0 = time.perf_counter()
    batches = []
    for k, row in enumerate(packed):
        ct = ctx.encrypt(row, keys.secret)
        batches.append(ctx.drop_level(ct, data_level) if ct.level > data_level else ct)
        report("encrypt", k + 1, len(packed))
    jax.block_until_ready([c.data for c in batches])
    seconds["encrypt"] = time.perf_counter() - t0

    marks = [time.perf_counter()]

    def on_step(stage: str, done: int, total: int) -> None:
        if stage == "train":
            marks.append(time.perf_counter())
        report(stage, done, total)

    log = BootstrapLog()
    if cfg.bootstrap:
        ct_w = train_encrypted_bootstrapped(ctx, eval_keys, batches, spec, schedule, progress=on_step, log=log)
    else:
        ct_w = train_encrypted(ctx, eval_keys, batches, spec, progress=on_step)
    jax.block_until_ready(ct_w.data)
    seconds["train"] = time.perf_counter() - marks[0]
    w_enc = unpack_weights(ctx.decrypt(ct_w, keys.secret), spec)

    t0 = time.perf_counter()
    reference = train_plaintext(data.x_train, data.y_train, spec)
    seconds["plaintext"] = time.perf_counter() - t0
    scores_enc, scores_plain = data.x_test @ w_enc, data.x_test @ reference.weights
    key_count = len(eval_keys.galois) + (eval_keys.relin is not None) + len(eval_keys.switching)
    return {
        "preset": cfg.name,
        "dataset": cfg.dataset,
        "spec": spec.describe(),
        "parameters": params.describe(),
        "security": insecure_note(params) if cfg.bootstrap else "128-bit (HE standard)",
        "allow_insecure": bool(params.allow_insecure),
        "log_n": params.log_n,
        "samples": spec.n_samples,
        "features": spec.n_features,
        "test_samples": len(data.y_test),
        "batch_size": spec.batch_size,
        "n_batches": spec.n_batches,
        "batches_used": len({spec.batch_of(t) for t in range(spec.iterations)}),
        "iterations": spec.iterations,
        "learning_rate": spec.learning_rate,
        "sigmoid": f"degree {spec.sigmoid.degree} on [-{spec.sigmoid.bound:g}, {spec.sigmoid.bound:g}]",
        "seconds": seconds,
        "iteration_s": [b - a for a, b in zip(marks, marks[1:])],
        "ms_per_iteration": 1000.0 * seconds["train"] / spec.iterations,
        "bootstraps": log.count,
        "bootstrap_at": list(log.at),
        "bootstrap_s": list(log.seconds),
        "shrink": schedule.shrink if schedule is not None else None,
        "keys": {"count": int(key_count), "bytes": _tree_bytes(eval_keys), "storage": ctx.key_storage},
        "data_bytes": _tree_bytes([c.data for c in batches]),
        "data_level": data_level,
        "accuracy": {"encrypted": accuracy(scores_enc, data.y_test), "float64": accuracy(scores_plain, data.y_test)},
        "auc": {"encrypted": auc(scores_enc, data.y_test), "float64": auc(scores_plain, data.y_test)},
        "agreement": float(np.mean((scores_enc > 0) == (scores_plain > 0))),
        "weight_error": float(np.max(np.abs(w_enc - reference.weights))),
        "max_abs_weight": float(np.max(np.abs(reference.weights))),
        "max_abs_z": reference.max_abs_z,
        "sigmoid_bound": spec.sigmoid.bound,
    }
