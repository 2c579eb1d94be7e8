"""Train hemx's Fashion-MNIST LSTM: each image read row by row (28 time steps of 28 pixels), a projection 28 -> 128
per step, an LSTM of 128 cells, a dense head 128 -> 10 on the last hidden state.

Needs the ``train`` extra (optax) and Debian's ``dataset-fashion-mnist``. Inputs are pixels / 255 (in [0, 1]).
Adam with a cosine decay, gradient clipping, and a penalty on the gate pre-activations and cells beyond
``--range`` (``mean(relu(|z| - range)^2)``): it keeps the ranges the encrypted polynomials are fitted on small, so a
low-degree sigmoid / tanh stays accurate. Fixed seed (``--seed``), so a rerun on the same machine gives the same
weights. It evaluates all 10,000 test images and writes ``hemx/nn/weights/lstm_fmnist.npz`` (float32; metadata:
test accuracy, input scale, the settings). Example::

    nice -n 5 .venv/bin/python scripts/train_fmnist_lstm.py --steps 800 > build/train_fmnist_lstm.log 2>&1
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

try:
    import optax
except ImportError:  # pragma: no cover
    sys.exit("train_fmnist_lstm.py needs optax: pip install -e '.[train]'")

from hemx.nn import lstm_fmnist, models


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def init(key, *, rows: int = 28, width: int = 128, hidden: int = 128, classes: int = 10) -> dict:
    """Glorot-normal weights, zero biases except the forget gate's (1.0)."""
    k = jax.random.split(key, 4)

    def glorot(key, shape):
        return jax.random.normal(key, shape) * np.sqrt(2.0 / sum(shape))

    bias = np.zeros(4 * hidden, np.float32)
    bias[hidden:2 * hidden] = 1.0
    return {"proj": {"w": glorot(k[0], (rows, width)), "b": jnp.zeros(width)},
            "lstm": {"w_x": glorot(k[1], (width, 4 * hidden)), "w_h": glorot(k[2], (hidden, 4 * hidden)),
                     "bias": jnp.asarray(bias)},
            "head": {"w": glorot(k[3], (hidden, classes)), "b": jnp.zeros(classes)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=800, help="Adam steps (batches of --batch-size)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--range", type=float, default=4.0, help="pre-activations beyond this are penalised")
    ap.add_argument("--penalty", type=float, default=0.1, help="weight of the range penalty")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(lstm_fmnist.WEIGHTS))
    args = ap.parse_args(argv)

    x_train, y_train = lstm_fmnist.load("train")
    x_test, y_test = lstm_fmnist.load("test")
    x_train, x_test = x_train.astype(np.float32), x_test.astype(np.float32)
    n, bs = len(x_train), args.batch_size
    steps_per_epoch = n // bs
    log(f"data: train {x_train.shape}, test {x_test.shape} (pixels / 255)")

    params = init(jax.random.PRNGKey(args.seed))
    tx_for = lambda total: optax.chain(optax.clip_by_global_norm(1.0),  # noqa: E731
                                       optax.adam(optax.cosine_decay_schedule(args.lr, total, alpha=0.05)))

    def loss_fn(p, xb, yb):
        logits, reach = lstm_fmnist.apply(p, xb, with_ranges=True)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()
        over = jnp.mean(jax.nn.relu(reach - args.range) ** 2)
        return ce + args.penalty * over, (ce, jnp.max(reach))

    def make_step(tx):
        @jax.jit
        def step(p, opt, xb, yb):
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, xb, yb)
            updates, opt = tx.update(grads, opt, p)
            return optax.apply_updates(p, updates), opt, loss, aux
        return step

    rng = np.random.default_rng(args.seed)
    total = args.steps
    log(f"{total} steps ({total / steps_per_epoch:.2f} epochs)")
    tx = tx_for(total)
    step = make_step(tx)
    opt = tx.init(params)
    p = params
    start = time.perf_counter()
    done = 0
    while done < total:
        order = rng.permutation(n)
        for b in range(steps_per_epoch):
            if done >= total:
                break
            idx = order[b * bs:(b + 1) * bs]
            p, opt, loss, (ce, reach) = step(p, opt, x_train[idx], y_train[idx])
            done += 1
            if done % 200 == 0 or done == total:
                log(f"step {done}/{total}: loss {float(loss):.4f} (ce {float(ce):.4f}), max |pre-activation| "
                    f"{float(reach):.2f}, {time.perf_counter() - start:.0f} s")
    train_s = time.perf_counter() - start

    logits = np.concatenate([np.asarray(lstm_fmnist.apply(p, x_test[i:i + 1000])) for i in range(0, len(x_test), 1000)])
    acc = float(np.mean(logits.argmax(-1) == y_test))
    log(f"test accuracy {acc:.4f} on {len(x_test)} images")
    meta = {"model": "lstm_fmnist", "dataset": "fashion-mnist (Debian dataset-fashion-mnist)",
            "input": "28 rows of 28 pixels, time-major, pixels / 255", "input_scale": 1.0 / 255.0,
            "test_accuracy": acc, "test_images": int(len(x_test)), "steps": int(total),
            "epochs": round(total / steps_per_epoch, 2), "batch_size": bs, "lr": args.lr, "seed": args.seed,
            "range": args.range, "penalty": args.penalty, "train_s": round(train_s, 1),
            "optimizer": "adam, cosine decay, clip 1.0"}
    models.save_variables(args.out, p, meta)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
