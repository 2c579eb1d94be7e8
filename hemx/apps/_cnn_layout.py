"""Slot layout of the encrypted CNN: packing, rotation plan (BSGS diagonals) and the plaintext weight vectors.

Layout ("position-major, image-minor"): a ciphertext with ``S`` slots holds ``B = S / 64`` images; slot
``p * B + b`` carries pixel ``p`` (row-major in the 8x8 image) of image ``b``. A rotation by ``k * B`` slots
therefore shifts every image's 64 positions by ``k`` at once (cyclically: 64 groups of B slots), and every
layer works on all ``B`` images of every ciphertext in the batch in the same operation.

- Convolution: ``sum_k rot(x, off_k * B) * w_k``, offsets ``off = 8 dy + dx`` (one hoisted rotation per kernel
  tap, shared by every channel), each channel's output in its own ciphertext; positions outside the 6x6 valid
  output are zeroed by the weight masks.
- Average pooling is linear and is folded into the first fully connected layer's weights.
- Fully connected layers: a matrix ``M`` over the 64 positions (rows: outputs at positions 0..H-1) is applied
  with Halevi-Shoup diagonals ``y = sum_d diag_d(M) * rot(x, d)``, evaluated baby-step giant-step:
  ``y = sum_g rot(sum_s rot(diag_{g b + s}, -g b) * rot(x, s), g b)``; only non-zero diagonals are used.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.apps._cnn_model import (
    CONV_SIDE,
    IMAGE_SIDE,
    KERNEL,
    NUM_CLASSES,
    PIXEL_MAX,
    POOL,
    CNNModel,
    check_images,
)
from hemx.errors import ParameterError, ShapeError, SlotError

POSITIONS = IMAGE_SIDE * IMAGE_SIDE  # 64 slot groups per image
CONV_OFFSETS = tuple(dy * IMAGE_SIDE + dx for dy in range(KERNEL) for dx in range(KERNEL))
LAYERS = ("conv", "square 1", "fc1", "square 2", "fc2")  # one rescale each
DEPTH = len(LAYERS)


@dataclasses.dataclass(frozen=True)
class MatVecPlan:
    """Baby-step giant-step plan of one fully connected layer over the 64 positions.

    Attributes:
        baby: baby-step size ``b`` (a power of two dividing 64).
        diagonals: the non-zero diagonals ``d`` in [0, 64), ascending.
        giants: giant indices ``g`` (``d = g b + s``) that own at least one diagonal, ascending.
    """

    baby: int
    diagonals: tuple[int, ...]
    giants: tuple[int, ...]

    @property
    def baby_steps(self) -> tuple[int, ...]:
        """Baby rotations ``s`` (positions) used by some diagonal, 0 included when used."""
        return tuple(sorted({d % self.baby for d in self.diagonals}))

    @property
    def rotations(self) -> tuple[int, ...]:
        """Non-zero rotation amounts in positions: baby steps and giant steps."""
        steps = {s for s in self.baby_steps if s} | {g * self.baby for g in self.giants if g}
        return tuple(sorted(steps))

    def key_switches(self, channels: int) -> int:
        """Rotations on ciphertexts per input ciphertext of each channel: ``channels`` x babies + giants."""
        return channels * sum(1 for s in self.baby_steps if s) + sum(1 for g in self.giants if g)


def plan_matvec(structure: np.ndarray, channels: int) -> MatVecPlan:
    """Choose the baby-step size minimizing rotations for a boolean ``(64, 64)`` non-zero pattern.

    Ties go to the larger baby step (fewer giant steps, which are not hoisted).
    """
    structure = np.asarray(structure, dtype=bool)
    rows, cols = np.nonzero(structure)
    diagonals = tuple(sorted({int(d) for d in (cols - rows) % POSITIONS}))
    if not diagonals:
        raise ParameterError("a fully connected layer has no non-zero weights")
    best = None
    baby = 1
    while baby <= POSITIONS:
        plan = MatVecPlan(baby, diagonals, tuple(sorted({d // baby for d in diagonals})))
        key = (plan.key_switches(channels), -baby)
        if best is None or key < best[0]:
            best = (key, plan)
        baby *= 2
    return best[1]


def conv_valid_positions() -> np.ndarray:
    """Boolean ``(64,)``: positions ``8 i + j`` with ``i, j < 6`` (outputs of the valid 3x3 convolution)."""
    grid = np.zeros((IMAGE_SIDE, IMAGE_SIDE), dtype=bool)
    grid[:CONV_SIDE, :CONV_SIDE] = True
    return grid.reshape(-1)


def fc1_matrices(model: CNNModel) -> np.ndarray:
    """First fully connected layer with the 2x2 average pooling folded in: ``(C, 64, 64)`` (out, in positions).

    ``M[c, h, 8 i + j] = fc1_w[h, c, i // 2, j // 2] / 4`` for ``i, j < 6`` and ``h < H``, zero elsewhere.
    """
    c, h = model.channels, model.hidden
    pooled_to_conv = np.repeat(np.repeat(model.fc1_w, POOL, axis=2), POOL, axis=3) / (POOL * POOL)  # (H, C, 6, 6)
    full = np.zeros((h, c, IMAGE_SIDE, IMAGE_SIDE))
    full[:, :, :CONV_SIDE, :CONV_SIDE] = pooled_to_conv
    out = np.zeros((c, POSITIONS, POSITIONS))
    out[:, :h, :] = full.reshape(h, c, POSITIONS).transpose(1, 0, 2)
    return out


def fc2_matrix(model: CNNModel) -> np.ndarray:
    """Output layer over positions: ``(1, 64, 64)`` with ``M[0, k, j] = fc2_w[k, j]`` for ``k < 10, j < H``."""
    out = np.zeros((1, POSITIONS, POSITIONS))
    out[0, :NUM_CLASSES, : model.hidden] = model.fc2_w
    return out


def fc1_structure(hidden: int) -> np.ndarray:
    """Non-zero pattern of :func:`fc1_matrices` (every channel alike), from the layout alone."""
    s = np.zeros((POSITIONS, POSITIONS), dtype=bool)
    s[:hidden, conv_valid_positions()] = True
    return s


def fc2_structure(hidden: int) -> np.ndarray:
    s = np.zeros((POSITIONS, POSITIONS), dtype=bool)
    s[:NUM_CLASSES, :hidden] = True
    return s


@dataclasses.dataclass(frozen=True)
class CNNSpec:
    """Packing layout and rotation plan of the encrypted CNN for one slot count and model shape.

    Attributes:
        slots: slots per ciphertext (the context's ``slots``).
        channels, hidden: C and H of the model.
        fc1, fc2: baby-step giant-step plans of the two fully connected layers.
        depth: rescales the circuit needs (ciphertexts must be encrypted at a level >= depth).
    """

    slots: int
    channels: int
    hidden: int
    fc1: MatVecPlan
    fc2: MatVecPlan
    depth: int = DEPTH

    @property
    def images_per_ciphertext(self) -> int:
        """B = slots / 64."""
        return self.slots // POSITIONS

    @property
    def rotations(self) -> tuple[int, ...]:
        """Every rotation step (in slots) the circuit uses: pass it to ``ctx.keygen(rotations=...)``."""
        positions = {o for o in CONV_OFFSETS if o} | set(self.fc1.rotations) | set(self.fc2.rotations)
        return tuple(sorted(p * self.images_per_ciphertext for p in positions))

    def num_ciphertexts(self, num_images: int) -> int:
        return -(-int(num_images) // self.images_per_ciphertext)

    def key_switches(self) -> int:
        """Key switches per ciphertext of images: rotations and relinearizations of the whole circuit."""
        conv = sum(1 for o in CONV_OFFSETS if o)
        return conv + self.channels + self.fc1.key_switches(self.channels) + 1 + self.fc2.key_switches(1)


def plan(model: CNNModel, slots: int) -> CNNSpec:
    """The :class:`CNNSpec` for ``model`` at ``slots`` slots per ciphertext (a power of two >= 64)."""
    if not isinstance(model, CNNModel):
        raise ParameterError(f"expected a CNNModel, got {type(model).__name__}")
    if not isinstance(slots, (int, np.integer)) or slots < POSITIONS or slots & (slots - 1):
        raise SlotError(f"slots must be a power of two >= {POSITIONS} (64 positions per image), got {slots!r}")
    if model.hidden > POSITIONS:
        raise ParameterError(f"the layout holds at most {POSITIONS} hidden units, the model has {model.hidden}")
    return CNNSpec(
        slots=int(slots),
        channels=model.channels,
        hidden=model.hidden,
        fc1=plan_matvec(fc1_structure(model.hidden), model.channels),
        fc2=plan_matvec(fc2_structure(model.hidden), 1),
    )


def check_spec(spec: CNNSpec, model: CNNModel) -> None:
    if not isinstance(spec, CNNSpec):
        raise ParameterError(f"expected a CNNSpec (from hemx.apps.cnn.plan), got {type(spec).__name__}")
    if (spec.channels, spec.hidden) != (model.channels, model.hidden):
        raise ShapeError(
            f"the spec was planned for C={spec.channels}, H={spec.hidden} but the model has "
            f"C={model.channels}, H={model.hidden}; call plan(model, slots) again"
        )


# ------------------------------------------------------------------------------------------------ packing


def pack_images(images, spec: CNNSpec) -> np.ndarray:
    """Slot values of the encrypted input: float64 ``(num_ciphertexts, slots)``.

    Args:
        images: ``(n, 8, 8)`` or ``(n, 64)`` pixel values in [0, 16]; divided by 16 here. The last
            ciphertext is padded with empty (all-zero) images.
    """
    x = check_images(images).reshape(-1, POSITIONS) / PIXEL_MAX
    per_ct = spec.images_per_ciphertext
    count = spec.num_ciphertexts(x.shape[0])
    padded = np.zeros((count * per_ct, POSITIONS))
    padded[: x.shape[0]] = x
    # (ct, image, position) -> (ct, position, image): slot p * B + b
    return padded.reshape(count, per_ct, POSITIONS).transpose(0, 2, 1).reshape(count, spec.slots)


def unpack_logits(values, spec: CNNSpec, num_images: int | None = None) -> np.ndarray:
    """Logits ``(num_images, 10)`` from decrypted slot values ``(num_ciphertexts, slots)``.

    ``num_images`` drops the padding images of the last ciphertext (default: all ``num_ciphertexts * B``).
    """
    v = np.asarray(values)
    if np.iscomplexobj(v):
        v = v.real
    if v.ndim == 1:
        v = v[None]
    if v.ndim != 2 or v.shape[1] != spec.slots:
        raise ShapeError(f"decrypted values must have shape (num_ciphertexts, {spec.slots}), got {np.shape(values)}")
    per_ct = spec.images_per_ciphertext
    total = v.shape[0] * per_ct
    if num_images is None:
        num_images = total
    if not 0 < num_images <= total:
        raise ShapeError(f"num_images must be in [1, {total}] for {v.shape[0]} ciphertexts, got {num_images}")
    logits = v.reshape(v.shape[0], POSITIONS, per_ct)[:, :NUM_CLASSES, :].transpose(0, 2, 1)
    return logits.reshape(total, NUM_CLASSES)[:num_images]


# ------------------------------------------------------------------------------------------------ weight vectors


def _to_slots(position_values: np.ndarray, spec: CNNSpec) -> np.ndarray:
    """Per-position values ``(..., 64)`` -> slot values ``(..., slots)`` (each repeated for the B images)."""
    return np.repeat(position_values, spec.images_per_ciphertext, axis=-1)


@dataclasses.dataclass(frozen=True)
class CircuitTables:
    """The model as slot vectors for the packed circuit (float64; or plaintexts once encoded).

    Attributes:
        conv_w: ``(9, C, 1, slots)``: tap ``k`` of every channel, on the valid output positions.
        conv_b: ``(C, 1, slots)``.
        fc1: ``(G1, b1, C, 1, slots)``: pre-rotated diagonals, giant-major, zero where a diagonal is unused.
        fc1_b: ``(slots,)``: bias at positions 0..H-1.
        fc2: ``(G2, b2, 1, 1, slots)``.
        fc2_b: ``(slots,)``: bias at positions 0..9.
    """

    conv_w: object
    conv_b: object
    fc1: object
    fc1_b: object
    fc2: object
    fc2_b: object


def bsgs_diagonals(matrices: np.ndarray, plan_: MatVecPlan) -> np.ndarray:
    """Pre-rotated diagonals ``(G, b, C, 64)`` of position matrices ``(C, 64, 64)`` for the BSGS evaluation.

    Entry ``[gi, s, c]`` is ``roll(diag_{g b + s}(M_c), g b)`` (numpy roll: a right rotation by ``g b``), with
    ``diag_d(M)[i] = M[i, (i + d) mod 64]``; it is zero when ``g b + s`` is not a planned diagonal.
    """
    rows = np.arange(POSITIONS)
    out = np.zeros((len(plan_.giants), plan_.baby, matrices.shape[0], POSITIONS))
    wanted = set(plan_.diagonals)
    for gi, g in enumerate(plan_.giants):
        for s in range(plan_.baby):
            d = g * plan_.baby + s
            if d in wanted:
                diag = matrices[:, rows, (rows + d) % POSITIONS]  # (C, 64)
                out[gi, s] = np.roll(diag, g * plan_.baby, axis=-1)
    return out


def circuit_tables(model: CNNModel, spec: CNNSpec) -> CircuitTables:
    """Slot vectors of every weight and bias of ``model`` for the layout of ``spec``."""
    check_spec(spec, model)
    valid = conv_valid_positions().astype(np.float64)
    taps = model.conv_w.reshape(model.channels, KERNEL * KERNEL).T  # (9, C)
    conv_w = taps[:, :, None, None] * valid  # (9, C, 1, 64)
    conv_b = model.conv_b[:, None, None] * valid  # (C, 1, 64)
    fc1 = bsgs_diagonals(fc1_matrices(model), spec.fc1)[:, :, :, None, :]
    fc2 = bsgs_diagonals(fc2_matrix(model), spec.fc2)[:, :, :, None, :]
    fc1_b = np.zeros(POSITIONS)
    fc1_b[: model.hidden] = model.fc1_b
    fc2_b = np.zeros(POSITIONS)
    fc2_b[:NUM_CLASSES] = model.fc2_b
    return CircuitTables(*(_to_slots(t, spec) for t in (conv_w, conv_b, fc1, fc1_b, fc2, fc2_b)))
