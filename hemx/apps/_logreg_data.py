"""The breast-cancer data for ``hemx.apps.logreg``: a fixed stratified split, standardized to [-1, 1].

scikit-learn ships the Wisconsin breast-cancer table (569 samples, 30 features) inside the package, so nothing
is downloaded. Preprocessing uses statistics of the training part only (what the data owner has): each feature
is centred and divided by its standard deviation, clipped to ``[-clip, clip]`` and divided by ``clip``, so
every value lies in [-1, 1]. A constant 1 is appended as the last column (the bias).

:func:`load_fashion_mnist` gives the HELR-at-scale task: Fashion-MNIST (read by :mod:`hemx.nn.data`) as two classes,
images averaged down to 14x14 = 196 pixels, centred, the bias appended.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError

TOTAL_FEATURES = 30  # columns of sklearn's load_breast_cancer


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Preprocessed train/test split.

    Attributes:
        x_train: float64 ``(n_train, d)``: features in [-1, 1], the last column is the bias (all ones).
        y_train: int64 ``(n_train,)`` labels in {0, 1} (1 = benign, as scikit-learn encodes it).
        x_test: float64 ``(n_test, d)``, same preprocessing (training statistics).
        y_test: int64 ``(n_test,)``.
        feature_names: the ``d - 1`` feature names, then "bias".
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...]

    @property
    def n_features(self) -> int:
        """Columns of ``x_train`` including the bias."""
        return int(self.x_train.shape[1])


def _check_count(name: str, value: int | None, upper: int) -> None:
    if value is None:
        return
    if not isinstance(value, (int, np.integer)) or not 2 <= value <= upper:
        raise ParameterError(f"{name} must be an integer in [2, {upper}], got {value!r}")


def _stratified_subset(x: np.ndarray, y: np.ndarray, count: int | None, seed: int):
    """``count`` rows of ``(x, y)`` with the class ratio kept (all rows when count is None or the full size)."""
    if count is None or count == len(y):
        return x, y
    from sklearn.model_selection import train_test_split

    x_sub, _, y_sub, _ = train_test_split(x, y, train_size=count, stratify=y, random_state=seed)
    return x_sub, y_sub


def load_data(
    *,
    test_size: float = 0.2,
    random_state: int = 0,
    clip: float = 3.0,
    n_train: int | None = None,
    n_test: int | None = None,
    n_features: int | None = None,
) -> Dataset:
    """Load scikit-learn's bundled breast-cancer data, split it and standardize it.

    Args:
        test_size: fraction held out for testing (stratified split, ``random_state`` fixes it).
        random_state: seed of the split; the subsets below use ``random_state + 1`` and ``+ 2`` (reusing the
            split's seed would correlate the subsets with the split).
        clip: standardized values are clipped to ``[-clip, clip]`` and divided by ``clip``.
        n_train, n_test: keep a stratified subset of this many training / test samples (tests use small ones).
        n_features: keep only the first ``n_features`` of the 30 features.

    Returns:
        a :class:`Dataset` whose ``x`` arrays have ``n_features + 1`` columns (the bias last).
    """
    if not 0.0 < float(test_size) < 1.0:
        raise ParameterError(f"test_size must be in (0, 1), got {test_size!r}")
    if not float(clip) > 0.0:
        raise ParameterError(f"clip must be positive, got {clip!r}")
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    table = load_breast_cancer()
    x_all = np.asarray(table.data, dtype=np.float64)
    y_all = np.asarray(table.target, dtype=np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x_all, y_all, test_size=test_size, random_state=random_state,
                                              stratify=y_all)
    _check_count("n_train", n_train, len(y_tr))
    _check_count("n_test", n_test, len(y_te))
    if n_features is not None and (not isinstance(n_features, (int, np.integer))
                                   or not 1 <= n_features <= TOTAL_FEATURES):
        raise ParameterError(f"n_features must be an integer in [1, {TOTAL_FEATURES}], got {n_features!r}")
    keep = TOTAL_FEATURES if n_features is None else int(n_features)
    x_tr, y_tr = _stratified_subset(x_tr[:, :keep], y_tr, n_train, random_state + 1)
    x_te, y_te = _stratified_subset(x_te[:, :keep], y_te, n_test, random_state + 2)

    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)
    std = np.where(std > 0, std, 1.0)

    def prepare(x: np.ndarray) -> np.ndarray:
        scaled = np.clip((x - mean) / std, -clip, clip) / clip
        return np.hstack([scaled, np.ones((len(x), 1))])

    names = tuple(str(n) for n in table.feature_names[:keep]) + ("bias",)
    return Dataset(prepare(x_tr), y_tr, prepare(x_te), y_te, names)


# ------------------------------------------------------------------------------------------------------------
# Fashion-MNIST as a two-class task, 14x14 (the HELR-at-scale preset)
# ------------------------------------------------------------------------------------------------------------

# T-shirt/top and Pullover against Shirt and Coat: each group holds one side of the two pairs a linear model
# confuses most on Fashion-MNIST (T-shirt/top vs Shirt, Pullover vs Coat), and the four classes give 24,000
# training images (one pair alone has 12,000, fewer than the 16,384 samples of the HELR-at-scale run)
FASHION_NEGATIVE = (0, 2)
FASHION_POSITIVE = (6, 4)
FASHION_SIDE = 14  # 28x28 images averaged over 2x2 blocks: 196 features


def downsample(images: np.ndarray) -> np.ndarray:
    """uint8 or float ``(n, 28, 28)`` images -> float64 ``(n, 196)``: means of 2x2 blocks, divided by 255."""
    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ParameterError(f"expected (n, 28, 28) images, got shape {images.shape}")
    side = FASHION_SIDE
    return images.reshape(-1, side, 2, side, 2).mean(axis=(2, 4)).reshape(-1, side * side) / 255.0


def _check_classes(negative, positive) -> tuple[tuple[int, ...], tuple[int, ...]]:
    groups = []
    for name, group in (("negative", negative), ("positive", positive)):
        try:
            values = tuple(int(c) for c in group)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be a sequence of Fashion-MNIST class numbers, got {group!r}") from None
        if not values or any(not 0 <= c <= 9 for c in values) or len(set(values)) != len(values):
            raise ParameterError(f"{name} must hold distinct class numbers in 0..9, got {group!r}")
        groups.append(values)
    if set(groups[0]) & set(groups[1]):
        raise ParameterError(f"a class is on both sides: negative {groups[0]}, positive {groups[1]}")
    return groups[0], groups[1]


def load_fashion_mnist(
    *,
    n_train: int | None = 16384,
    n_test: int | None = None,
    negative=FASHION_NEGATIVE,
    positive=FASHION_POSITIVE,
    random_state: int = 0,
    directory=None,
) -> Dataset:
    """Fashion-MNIST as a two-class task at 14x14 (label 1 = a ``positive`` class), read by
    :func:`hemx.nn.data.fashion_mnist` (Debian's ``dataset-fashion-mnist``).

    Images are averaged over 2x2 blocks and divided by 255 (:func:`downsample`), then centred by the mean of the
    training samples kept (so every value lies in [-1, 1]); a constant 1 is appended (the bias). The training samples
    are a random subset of ``n_train`` (all when None) in a random order fixed by ``random_state``: consecutive
    blocks of it are the mini-batches. The test samples are every test image of the chosen classes (or the first
    ``n_test`` of them in a random order).

    Returns:
        a :class:`Dataset` with ``x`` arrays of 197 columns (196 pixels, then the bias).
    """
    from hemx.nn.data import fashion_mnist

    negative, positive = _check_classes(negative, positive)
    chosen = negative + positive
    rng = np.random.default_rng(random_state)
    parts = []
    for split, count, name in (("train", n_train, "n_train"), ("test", n_test, "n_test")):
        images, labels = fashion_mnist(split, directory=directory)
        keep = np.flatnonzero(np.isin(labels, chosen))
        _check_count(name, count, len(keep))
        order = keep[rng.permutation(len(keep))]
        if count is not None:
            order = order[: int(count)]
        elif split == "test":
            order = keep  # all test images, in the file's order
        parts.append((downsample(images[order]), np.isin(labels[order], positive).astype(np.int64)))
    (x_tr, y_tr), (x_te, y_te) = parts
    mean = x_tr.mean(axis=0)

    def prepare(x: np.ndarray) -> np.ndarray:
        return np.hstack([x - mean, np.ones((len(x), 1))])

    names = tuple(f"pixel_{r}_{c}" for r in range(FASHION_SIDE) for c in range(FASHION_SIDE)) + ("bias",)
    return Dataset(prepare(x_tr), y_tr, prepare(x_te), y_te, names)
