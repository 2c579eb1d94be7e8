"""hemx.nn.data: Fashion-MNIST from Debian's dataset-fashion-mnist package, padding, and the CIFAR-10 files fetched
from PyPI (cifar-10-model, foolbox) into the hemx cache.

The split tests need Debian's ``dataset-fashion-mnist`` (``scripts/system-deps.sh`` installs it): without it they are
reported as not run, naming the package (they fail in CI). The CIFAR-10 tests need the PyPI index (``pip download``)
and fail when it cannot be reached."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from hemx.errors import ParameterError
from hemx.nn import data
from tests.helpers.system import need_fashion_mnist


def test_fashion_mnist_test_split():
    need_fashion_mnist()
    images, labels = data.fashion_mnist("test")
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and labels.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(labels), np.full(10, 1000))
    np.testing.assert_array_equal(labels[:10], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7])  # the published test set's order
    assert images.max() == 255 and images.min() == 0


def test_fashion_mnist_train_split():
    need_fashion_mnist()
    images, labels = data.fashion_mnist("train")
    assert images.shape == (60000, 28, 28) and labels.shape == (60000,)
    np.testing.assert_array_equal(np.bincount(labels), np.full(10, 6000))
    assert labels[0] == 9  # the first training image is an ankle boot


def test_fashion_mnist_errors(tmp_path):
    with pytest.raises(ParameterError, match="'train' or 'test'"):
        data.fashion_mnist("validation")
    with pytest.raises(data.DataUnavailableError, match="apt-get install dataset-fashion-mnist"):
        data.fashion_mnist("test", directory=tmp_path)


def _write_idx(path, arr, compress):
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    raw = header + arr.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if compress else raw)


@pytest.mark.parametrize("compress", [True, False])
def test_idx_reader_on_written_files(tmp_path, compress):
    rng = np.random.default_rng(0)
    imgs, lbls = rng.integers(0, 256, (5, 28, 28)), rng.integers(0, 10, 5)
    suffix = ".gz" if compress else ""
    _write_idx(tmp_path / f"t10k-images-idx3-ubyte{suffix}", imgs, compress)
    _write_idx(tmp_path / f"t10k-labels-idx1-ubyte{suffix}", lbls, compress)
    got_i, got_l = data.fashion_mnist("test", directory=tmp_path)
    np.testing.assert_array_equal(got_i, imgs)
    np.testing.assert_array_equal(got_l, lbls)
    (tmp_path / f"t10k-labels-idx1-ubyte{suffix}").write_bytes(
        gzip.compress(b"\x00\x00\x0d\x01" + b"\x00" * 8) if compress else b"\x00\x00\x0d\x01" + b"\x00" * 8)
    with pytest.raises(ParameterError, match="unsigned-byte IDX"):
        data.fashion_mnist("test", directory=tmp_path)


def test_pad_to_32():
    rng = np.random.default_rng(1)
    x = rng.integers(1, 256, (3, 28, 28)).astype(np.uint8)
    y = data.pad_to_32(x)
    assert y.shape == (3, 32, 32) and y.dtype == np.uint8
    np.testing.assert_array_equal(y[:, 2:30, 2:30], x)
    assert y.sum(dtype=np.int64) == x.sum(dtype=np.int64)  # the border is zero
    assert data.pad_to_32(x[0]).shape == (32, 32)
    with pytest.raises(ParameterError, match="28, 28"):
        data.pad_to_32(np.zeros((3, 32, 32)))


def test_cifar10_missing_says_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path))
    assert data.cache_dir() == tmp_path
    for call in (data.cifar10_pretrained_cnn_path, data.cifar10_foolbox_images):
        with pytest.raises(data.DataUnavailableError, match="python -m hemx.nn.data fetch cifar10"):
            call()


def test_cifar10_fetch_and_load(tmp_path, monkeypatch):
    """`python -m hemx.nn.data fetch cifar10` end to end: pip download --no-deps, extract only the needed files."""
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path))
    assert data.main(["fetch", "cifar10"]) == 0
    files = sorted(p.name for p in (tmp_path / "cifar10").iterdir())
    assert "cnn_model.h5" in files and len(files) == 21  # the model and 20 PNGs, nothing else
    images, labels = data.cifar10_foolbox_images()
    assert images.shape == (20, 32, 32, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(labels, [3, 8, 8, 0, 6, 6, 1, 6, 3, 1, 0, 9, 5, 7, 9, 8, 5, 7, 8, 6])
    assert 60 < images.mean() < 200 and images.std() > 20  # real photographs, decoded to 0..255
    assert data.cifar10_pretrained_cnn_path().stat().st_size > 10_000_000
    assert data.main(["nonsense"]) == 2
