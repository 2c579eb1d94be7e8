"""Data for the :mod:`hemx.nn` models: Fashion-MNIST from Debian, and real CIFAR-10 images plus a pretrained CNN.

Nothing here downloads at import or at call time. The sources are:

* Fashion-MNIST: Debian's ``dataset-fashion-mnist`` package (``apt-get install dataset-fashion-mnist``), which puts
  the four IDX files under ``/usr/share/datasets/fashion-mnist/``. :func:`fashion_mnist` reads them (gzip or not).
* CIFAR-10: the 20 test images that PyPI ``foolbox`` 3.3.4 ships (``foolbox/data/cifar10_<i>_<label>.png``) and
  the pretrained Keras CNN that PyPI ``cifar-10-model`` 7.4.0 ships (``trained_models/cnn_model.h5``). Both
  packages pin TensorFlow, so they are never installed: ``python -m hemx.nn.data fetch cifar10`` runs
  ``pip download --no-deps`` into a temporary folder and extracts only those files into the hemx cache folder
  (``$HEMX_CACHE_DIR``, else ``~/.cache/hemx``), under ``cifar10/``.

PNG decoding uses matplotlib (a core dependency), whose ``imread`` reads PNG natively.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from hemx.errors import ParameterError

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_APT = "dataset-fashion-mnist"
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

# (PyPI requirement, file inside its wheel -> name in the cache folder)
_CIFAR10_SOURCES = (
    ("cifar-10-model==7.4.0", re.compile(r"^cifar_10_model/trained_models/cnn_model\.h5$")),
    ("foolbox==3.3.4", re.compile(r"^foolbox/data/cifar10_\d+_\d+\.png$")),
)
FETCH_CIFAR10_COMMAND = "python -m hemx.nn.data fetch cifar10"


class DataUnavailableError(ParameterError, FileNotFoundError):
    """A data set or model file is not on this machine; the message says how to get it."""


# --- Fashion-MNIST ---------------------------------------------------------------------------------------------

def _read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ParameterError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    start = 4 + 4 * ndim
    data = np.frombuffer(raw, dtype=np.uint8, offset=start)
    if data.size != int(np.prod(dims)):
        raise ParameterError(f"{path}: header says {dims}, file holds {data.size} bytes")
    return data.reshape(dims)


def _find(directory: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (directory / name).is_file():
            return directory / name
    return None


def fashion_mnist(split: str = "train", *, directory: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST ``split`` ("train": 60,000 images, "test": 10,000).

    Returns ``(images, labels)``: uint8 ``(N, 28, 28)`` and uint8 ``(N,)`` in 0..9 (see ``FASHION_MNIST_CLASSES``).
    ``directory`` defaults to ``$HEMX_FASHION_MNIST_DIR`` or the Debian package's folder.
    """
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ParameterError(f"Fashion-MNIST split must be 'train' or 'test', got {split!r}")
    folder = Path(directory or os.environ.get("HEMX_FASHION_MNIST_DIR") or FASHION_MNIST_DIR)
    img_path = _find(folder, f"{prefix}-images-idx3-ubyte")
    lbl_path = _find(folder, f"{prefix}-labels-idx1-ubyte")
    if img_path is None or lbl_path is None:
        raise DataUnavailableError(
            f"Fashion-MNIST ({split}) is not in {folder}: install Debian's package with "
            f"`apt-get install {FASHION_MNIST_APT}` (it puts the IDX files in {FASHION_MNIST_DIR})")
    images, labels = _read_idx(img_path), _read_idx(lbl_path)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise ParameterError(f"Fashion-MNIST files disagree: images {images.shape}, labels {labels.shape}")
    return images, labels


def pad_to_32(images: np.ndarray) -> np.ndarray:
    """Zero-pad 28x28 images to 32x32 (2 pixels on each side); the last two axes are (H, W), dtype kept."""
    images = np.asarray(images)
    if images.ndim < 2 or images.shape[-2:] != (28, 28):
        raise ParameterError(f"pad_to_32 expects (..., 28, 28) images, got {images.shape}")
    pad = [(0, 0)] * (images.ndim - 2) + [(2, 2), (2, 2)]
    return np.pad(images, pad)


# --- CIFAR-10 from PyPI packages -------------------------------------------------------------------------------

def cache_dir() -> Path:
    """The hemx cache folder: ``$HEMX_CACHE_DIR`` or ``~/.cache/hemx``."""
    env = os.environ.get("HEMX_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "hemx"


def _missing(what: str, where: Path) -> DataUnavailableError:
    return DataUnavailableError(
        f"{what} is not in {where}; fetch it (pip download --no-deps of cifar-10-model 7.4.0 and foolbox 3.3.4, "
        f"only the needed files extracted) with:  {FETCH_CIFAR10_COMMAND}")


def cifar10_pretrained_cnn_path() -> Path:
    """Path of the pretrained Keras CIFAR-10 CNN (``cnn_model.h5`` from PyPI cifar-10-model 7.4.0).

    The model takes raw 0..255 NHWC pixels. Raises :class:`DataUnavailableError` with the fetch command if absent.
    """
    path = cache_dir() / "cifar10" / "cnn_model.h5"
    if not path.is_file():
        raise _missing("the pretrained CIFAR-10 CNN (cnn_model.h5)", path.parent)
    return path


def cifar10_foolbox_images() -> tuple[np.ndarray, np.ndarray]:
    """The 20 CIFAR-10 test images shipped with foolbox 3.3.4.

    Returns ``(images, labels)``: uint8 ``(20, 32, 32, 3)`` (NHWC, RGB) and int64 ``(20,)``, in the files' order.
    """
    folder = cache_dir() / "cifar10"
    files = sorted(folder.glob("cifar10_*_*.png"), key=lambda p: int(p.stem.split("_")[1]))
    if len(files) != 20:
        raise _missing(f"the 20 foolbox CIFAR-10 images (found {len(files)})", folder)
    import matplotlib.image as mpimg

    images, labels = [], []
    for p in files:
        img = np.asarray(mpimg.imread(p, format="png"))  # float32 in [0, 1] for 8-bit PNGs
        if img.dtype != np.uint8:
            img = np.rint(img * 255.0).astype(np.uint8)
        if img.shape != (32, 32, 3):
            img = img[..., :3]
        if img.shape != (32, 32, 3):
            raise ParameterError(f"{p} is not a 32x32 RGB image: {img.shape}")
        images.append(img)
        labels.append(int(p.stem.split("_")[2]))
    return np.stack(images), np.array(labels, dtype=np.int64)


def fetch_cifar10(*, target: Path | None = None, python: str | None = None) -> Path:
    """Download (``pip download --no-deps``) the two wheels and extract the CNN and the 20 images into the cache."""
    target = Path(target or cache_dir() / "cifar10")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hemx-fetch-") as tmp:
        reqs = [req for req, _ in _CIFAR10_SOURCES]
        cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
               "-d", tmp, *reqs]
        subprocess.run(cmd, check=True)
        for req, pattern in _CIFAR10_SOURCES:
            dist = req.split("==")[0].replace("-", "_")
            wheels = sorted(Path(tmp).glob(f"{dist}-*.whl"))
            if not wheels:
                raise DataUnavailableError(f"pip download did not produce a wheel for {req}")
            with zipfile.ZipFile(wheels[0]) as zf:
                names = [n for n in zf.namelist() if pattern.match(n)]
                if not names:
                    raise DataUnavailableError(f"{wheels[0].name} holds no file matching {pattern.pattern}")
                for name in names:
                    (target / Path(name).name).write_bytes(zf.read(name))
    return target


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["fetch", "cifar10"]:
        where = fetch_cifar10()
        print(f"CIFAR-10 CNN and images in {where}")
        return 0
    if argv[:2] == ["fetch", "fashion-mnist"]:
        print(f"Fashion-MNIST comes from Debian: apt-get install {FASHION_MNIST_APT}")
        return 0
    print(f"usage: python -m hemx.nn.data fetch cifar10", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
