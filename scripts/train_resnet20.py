"""Train hemx's ResNet-20 with the HE-friendly polynomial activation on Fashion-MNIST (padded to 32x32, 1 channel).

Needs the ``train`` extra (optax) and Debian's ``dataset-fashion-mnist``. Sized for a CPU: it times a few steps
first and picks the number of epochs that fits ``--minutes`` of wall time, then trains with SGD + Nesterov momentum,
a linear warm-up and a cosine decay (over steps, or over the wall-time budget if that runs out first), weight decay, and random horizontal flips / 2-pixel shifts. At the end it
evaluates all 10,000 test images and writes ``hemx/nn/weights/resnet20_fmnist.npz`` (float32 weights; metadata:
activation coefficients, input scale, test accuracy, settings). Example::

    nice -n 10 .venv/bin/python scripts/train_resnet20.py --minutes 65 > build/train_resnet20.log 2>&1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

try:
    import optax
except ImportError:  # pragma: no cover
    sys.exit("train_resnet20.py needs optax: pip install -e '.[train]'")

from hemx.nn import data, models


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load(split: str):
    images, labels = data.fashion_mnist(split)
    x = data.pad_to_32(images).astype(np.float32)[..., None]  # raw 0..255, NHWC
    return x, labels.astype(np.int32)


def augment(rng: np.random.Generator, xb: np.ndarray) -> np.ndarray:
    flip = rng.random(len(xb)) < 0.5
    xb = np.where(flip[:, None, None, None], xb[:, :, ::-1], xb)
    dy, dx = rng.integers(-2, 3, size=2)
    return np.roll(xb, (int(dy), int(dx)), axis=(1, 2))  # the 2-pixel zero border makes the roll a shift


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=65.0, help="wall-time budget for training (excl. evaluation)")
    ap.add_argument("--epochs", type=int, default=0, help="fixed epoch count (0: as many as fit --minutes)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--activation", default="he", help="'he' (models.HE_ACTIVATION), 'relu' or 'c0,c1,c2'")
    ap.add_argument("--max-train", type=int, default=0, help="use only this many training images (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(models.FMNIST_WEIGHTS))
    args = ap.parse_args(argv)

    act = args.activation
    if act == "he":
        act = models.HE_ACTIVATION
    elif act != "relu":
        act = tuple(float(c) for c in act.split(","))
    input_scale = 1.0 / 255.0

    x_train, y_train = load("train")
    x_test, y_test = load("test")
    if args.max_train:
        x_train, y_train = x_train[:args.max_train], y_train[:args.max_train]
    n = len(x_train)
    steps_per_epoch = n // args.batch_size
    log(f"data: train {x_train.shape}, test {x_test.shape}; activation {act}; {jax.device_count()} device(s)")

    variables = models.resnet20_init(jax.random.PRNGKey(args.seed), in_channels=1, classes=10)
    params, stats = variables["params"], variables["batch_stats"]
    tx = optax.chain(
        optax.clip_by_global_norm(5.0),
        optax.add_decayed_weights(args.weight_decay),
        optax.inject_hyperparams(optax.sgd)(learning_rate=args.lr, momentum=0.9, nesterov=True),
    )
    opt_state = tx.init(params)

    def loss_fn(p, s, xb, yb):
        logits, new_s = models.resnet20_apply({"params": p, "batch_stats": s}, xb * input_scale, activation=act,
                                              train=True)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()
        return loss, (new_s, jnp.mean(jnp.argmax(logits, -1) == yb))

    @jax.jit
    def train_step(p, s, o, xb, yb, lr):
        o[2].hyperparams["learning_rate"] = lr
        (loss, (new_s, acc)), g = jax.value_and_grad(loss_fn, has_aux=True)(p, s, xb, yb)
        updates, o = tx.update(g, o, p)
        return optax.apply_updates(p, updates), new_s, o, loss, acc

    @jax.jit
    def predict(p, s, xb):
        return jnp.argmax(models.resnet20_apply({"params": p, "batch_stats": s}, xb * input_scale, activation=act), -1)

    def evaluate(p, s, x, y, batch=500):
        hits = 0
        for i in range(0, len(x), batch):
            hits += int(np.sum(np.asarray(predict(p, s, x[i:i + batch])) == y[i:i + batch]))
        return hits / len(x)

    rng = np.random.default_rng(args.seed)
    budget = args.minutes * 60.0
    t_start = time.time()

    # time a few steps (after compilation) on a throwaway copy to choose the epoch count
    if args.epochs:
        epochs = args.epochs
    else:
        idx = rng.permutation(n)[: args.batch_size]
        xb, yb = jnp.asarray(x_train[idx]), jnp.asarray(y_train[idx])
        out = train_step(params, stats, opt_state, xb, yb, 0.0)
        jax.block_until_ready(out)
        t0, probe = time.time(), 8
        for _ in range(probe):
            out = train_step(params, stats, opt_state, xb, yb, 0.0)
        jax.block_until_ready(out)
        step_s = (time.time() - t0) / probe
        remaining = budget - (time.time() - t_start)
        epochs = max(1, int(remaining / (step_s * steps_per_epoch * 1.08)))
        log(f"{step_s * 1000:.0f} ms/step, {steps_per_epoch} steps/epoch (~{step_s * steps_per_epoch / 60:.1f} min): "
            f"{epochs} epochs fit {remaining / 60:.1f} min")
    total = epochs * steps_per_epoch
    warmup = max(1, min(steps_per_epoch // 2, total // 10))

    def progress(step):  # fraction of training done: by steps, or by wall time if that runs out first
        return min(1.0, max(step / total, (time.time() - t_start) / budget))

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        return 0.5 * args.lr * (1 + np.cos(np.pi * progress(step)))

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    good = jax.device_get((params, stats))
    step, epochs_done, stop = 0, 0, False
    for epoch in range(epochs):
        perm = rng.permutation(n)
        t_ep, losses, accs = time.time(), [], []
        for b in range(steps_per_epoch):
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            xb = augment(rng, x_train[idx])
            params, stats, opt_state, loss, acc = train_step(params, stats, opt_state, jnp.asarray(xb),
                                                             jnp.asarray(y_train[idx]), float(lr_at(step)))
            step += 1
            if b % 25 == 0:
                losses.append(float(loss))
                accs.append(float(acc))
                if not np.isfinite(losses[-1]):
                    log(f"loss is {losses[-1]} at step {step}: keeping the weights of epoch {epochs_done}")
                    params, stats = good
                    stop = True
                    break
            if b % 100 == 0:
                log(f"epoch {epoch + 1}/{epochs} step {b}/{steps_per_epoch} loss {float(loss):.4f} "
                    f"acc {float(acc):.3f} lr {lr_at(step):.4f}")
            if progress(step) >= 1.0:
                stop = True
                break
        if stop and not np.isfinite(losses[-1]):
            break
        epochs_done = epoch + 1 if not stop else epoch + (b + 1) / steps_per_epoch
        good = jax.device_get((params, stats))
        log(f"epoch {epoch + 1} done in {time.time() - t_ep:.0f} s: mean loss {np.mean(losses):.4f}, "
            f"train acc {np.mean(accs):.3f}")
        if stop:
            log(f"time budget reached after {epochs_done:.2f} epochs")
            break
    train_minutes = (time.time() - t_start) / 60
    test_acc = evaluate(params, stats, x_test, y_test)
    log(f"test accuracy (10,000 images, float32): {test_acc:.4f} after {epochs_done:.2f} epochs, {train_minutes:.1f} min")

    meta = {
        "model": "resnet20", "dataset": "fashion-mnist", "input_shape": [32, 32, 1], "input_scale": input_scale,
        "activation": list(act) if not isinstance(act, str) else act, "shortcut": "B (1x1 conv + bn)",
        "test_accuracy": test_acc, "test_images": int(len(x_test)), "epochs": round(float(epochs_done), 2), "batch_size": args.batch_size,
        "optimizer": f"sgd nesterov 0.9, lr {args.lr} warmup+cosine, wd {args.weight_decay}, clip 5",
        "augmentation": "hflip + 2px shift", "train_minutes": round(train_minutes, 1), "seed": args.seed,
        "preprocessing": "pad 28x28 -> 32x32 with zeros (hemx.nn.data.pad_to_32), NHWC, x * input_scale",
    }
    models.save_variables(out, {"params": params, "batch_stats": stats}, meta)
    log(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
