"""Test data for hemx.nn: the pretrained CIFAR-10 CNN and foolbox's 20 images, fetched when absent."""

from __future__ import annotations

from hemx.nn import data


def cifar10_files():
    """``(cnn_model.h5 path, (images, labels))``, fetched (pip download --no-deps) into the test cache if absent."""
    try:
        data.cifar10_pretrained_cnn_path()
        data.cifar10_foolbox_images()
    except data.DataUnavailableError:
        data.fetch_cifar10()
    return data.cifar10_pretrained_cnn_path(), data.cifar10_foolbox_images()
