"""Inter-device traffic of one hybrid key switch under limb sharding, per dataflow (MP / DC / OC).

Plain arithmetic on ``N``, the towers ``l`` of ``Q_l``, the special towers ``K``, the digits and the device
count ``D``; compared with the collective bytes of the compiled programs (the ``shard_map`` key switch of
``hemx.ckks.sharded_keyswitch`` and XLA's partitioner) by ``hemx bench scaling`` (``hemx.parallel.traffic``, ``docs/results/parallel-cpu.md``).

Assumptions (an *owner-computes* lower bound, not a description of what XLA emits):

1. Limb sharding: each device owns ``l / D`` of the ``Q_l`` towers and ``K / D`` of the ``P`` towers of every
   polynomial (balanced; when ``D`` does not divide ``l`` or ``K`` the model still uses ``(D - 1) / D`` fractions,
   i.e. fractional towers; hemx's placement rule would replicate such an array instead, see ``docs/parallel.md``).
2. The switching key's rows live with the output towers they multiply (key tower ``t`` on the owner of
   accumulator tower ``t``), so the key product and the digit sum are local. Keys never move.
3. Element-wise work, the NTT / INTT of a tower, the Galois automorphism (a permutation inside each tower) and
   the tensor product of a multiplication are local: they need nothing from other towers.
4. The steps that need other towers exchange the *inputs* of a basis conversion, never its outputs or partial
   sums (the conversion's inputs are the smaller side: ``alpha_d <= beta_d``, ``K <= l`` in practice):

   * ModUp: the basis conversion of digit ``d`` (after the local INTT) needs all ``alpha_d`` coefficient
     towers of the digit on every device that owns a target tower, and every device owns targets (its ``P``
     towers): each device receives the digit towers it does not own, ``alpha_d (D - 1) / D`` towers, summed
     over digits ``l (D - 1) / D``;
   * ModDown: every ``Q_l`` output tower needs the ``K`` towers of ``[acc]_P`` of both polynomials (after
     their local INTT): ``2 K (D - 1) / D`` towers per device;
   * rescale (separate, after a multiplication): every kept tower needs the dropped top ``r`` towers of both
     polynomials: ``2 r (D - 1) / D``; folded into ModDown (``Context.mul(..., rescale=True)``) it is the same
     exchange with ``K + r`` dropped towers.
5. Words are the ciphertext's residues (``word_bytes``, 4 for hemx's uint32); "received per device" is the mean
   over the ``D`` devices (with balanced ownership every device receives the same), "total" is ``D`` times it.

Key-aligned owner computes (``key_aligned=True``; what ``hemx.ckks.sharded_keyswitch`` runs with ``jax.shard_map``).
Assumption 2 cannot hold for a stored ciphertext layout and a stored key layout at once: the key is split in
contiguous blocks of ``c = (K + L) / D`` rows over the ``P + Q`` basis (``L`` the key's ``Q`` rows, ``key_rows =
K + L``), the ciphertext in blocks of ``l / D`` ``Q`` towers (or replicated where ``D`` does not divide ``l``).
hemx keeps the key still and lets device ``k`` own the accumulator rows of its key block, so on top of the
exchanges above one more step, ``"relayout"``, moves the switched rows to the ciphertext's layout: every output
row whose key-block owner is not one of its layout owners crosses once per layout owner (a replicated output:
``D - 1`` times). With a folded rescale the addend ``d`` (two polynomials of ``l`` towers) also moves once, from
the input's layout to the key-block owner of each tower, where ``acc + P d`` is formed (its dropped top towers
then travel with ``[acc]_P``: the "rescale" step). Where the input is
replicated (``D`` does not divide ``l``) ModUp needs no exchange. Counted exactly from the layouts (static
integers), without the padding of uneven collective-permute pieces.

A separate rescale on the key-aligned path (``rescale > 0``, not folded; :func:`rescale_towers`, what
``hemx.ckks.sharded_keyswitch.rescale`` runs for ``Context.rescale``) goes from the ``l``-tower layout to the
``(l - r)``-tower one in one exchange: its ``"rescale"`` step is counted exactly (each dropped tower of both
polynomials to every device without it: ``2 r (D - 1) / D`` where the input is split, 0 where it is replicated),
and the kept towers whose layout owners change (``l / D`` -> ``(l - r) / D`` blocks, or a split input to a
replicated output) add to ``"relayout"``.

Under those assumptions the *volume* is the same for the three dataflows: they compute the same conversions,
only in a different order. What differs is how the exchange is cut (``rounds``: collectives in sequence) and the
largest received buffer that must be live at once (``peak_towers``):

* MP: one exchange of all ``l`` towers before ModUp, one of ``2 K`` before ModDown (2 rounds; peak ``l``);
* DC: one exchange per digit, just before that digit's conversion, then ModDown (``dnum + 1`` rounds; peak
  ``max(alpha_d, 2K)``, i.e. the smallest live buffer);
* OC: the BAT operands of every digit are computed once up front (hemx's OC) and every output tile needs every
  other digit, so ModUp's exchange is all ``l`` towers at once like MP; ModDown's ``[acc]_P`` is complete
  before the first ``Q`` tile (2 rounds; peak ``l``). A strictly per-tile OC that re-fetched the digits for each
  tile would multiply ModUp's volume by the number of tiles per device; hemx does not do that.
"""

from __future__ import annotations

import dataclasses

from hemx.dataflow.shape import KeySwitchShape
from hemx.errors import ParameterError

#: Dataflows modelled (CiFlow's names, upper case as elsewhere in hemx.dataflow).
DEVICE_DATAFLOWS = ("MP", "DC", "OC")


@dataclasses.dataclass(frozen=True)
class DeviceTraffic:
    """Inter-device traffic of one key switch (module docstring for the assumptions).

    Attributes:
        dataflow: "MP", "DC" or "OC".
        devices: ``D``.
        steps: ``{step: towers received per device}`` for ``"modup"``, ``"moddown"`` and ``"rescale"``.
        rounds: collectives in sequence; peak_towers: the largest received buffer live at once (per device).
        tower_words: words per tower (``N``); word_bytes: bytes per word.
    """

    dataflow: str
    devices: int
    steps: dict
    rounds: int
    peak_towers: float
    tower_words: int
    word_bytes: int

    @property
    def towers_per_device(self) -> float:
        return float(sum(self.steps.values()))

    @property
    def words_per_device(self) -> float:
        return self.towers_per_device * self.tower_words

    @property
    def bytes_per_device(self) -> float:
        return self.words_per_device * self.word_bytes

    @property
    def total_bytes(self) -> float:
        """Bytes received summed over the ``D`` devices."""
        return self.bytes_per_device * self.devices

    def as_dict(self) -> dict:
        return {"dataflow": self.dataflow, "devices": self.devices, "steps_towers": dict(self.steps),
                "rounds": self.rounds, "peak_towers": self.peak_towers, "towers_per_device": self.towers_per_device,
                "words_per_device": self.words_per_device, "bytes_per_device": self.bytes_per_device,
                "total_bytes": self.total_bytes}


def _layout_owners(row: int, n: int, devices: int) -> set[int]:
    """Devices holding tower ``row`` of an ``n``-tower polynomial in the ciphertext layout."""
    return {row // (n // devices)} if n % devices == 0 else set(range(devices))


def relayout_towers(shape: KeySwitchShape, devices: int, *, key_rows: int | None = None, rescale: int = 0,
                    folded: bool = False) -> float:
    """Towers received per device (mean) by the key-aligned layout's extra exchanges (module docstring):
    the switched pair from the key blocks to the ciphertext layout, and with a folded rescale the addend's
    terms. ``key_rows``: the key's rows ``K + L`` (default ``K + l``: a key switch at the top level)."""
    l, k, d = shape.towers, shape.special, int(devices)
    rows = k + l if key_rows is None else int(key_rows)
    if d == 1:
        return 0.0
    if rows % d:
        raise ParameterError(f"the key-aligned layout needs devices ({d}) dividing the key's rows ({rows})")
    c = rows // d
    r = rescale if folded else 0
    out = l - r
    total = 0
    for t in range(out):  # the switched pair: key-block owner -> layout owners
        total += 2 * len(_layout_owners(t, out, d) - {(k + t) // c})
    if r:  # the addend d: from the input's layout to the key-block owner of each tower
        for t in range(l):
            total += 2 * int((k + t) // c not in _layout_owners(t, l, d))
    return total / d


def rescale_towers(towers: int, rescale: int, devices: int) -> dict[str, float]:
    """Towers received per device (mean) by a separate rescale of a ciphertext (two polynomials) from ``towers``
    to ``towers - rescale`` towers, both in the ciphertext layout (module docstring): ``{"rescale": ...}`` the
    dropped towers to every device without them, ``{"relayout": ...}`` the kept towers to the output's layout
    owners that do not hold them. Exact for ``hemx.ckks.sharded_keyswitch.rescale`` (static integers)."""
    l, r, d = int(towers), int(rescale), int(devices)
    if not 0 <= r < l:
        raise ParameterError(f"rescale must drop between 0 and {l - 1} towers, got {r}")
    if d == 1 or r == 0:
        return {"rescale": 0.0, "relayout": 0.0}
    dropped = sum(2 * (d - len(_layout_owners(t, l, d))) for t in range(l - r, l))
    kept = sum(2 * len(_layout_owners(t, l - r, d) - _layout_owners(t, l, d)) for t in range(l - r))
    return {"rescale": dropped / d, "relayout": kept / d}


def device_traffic(shape: KeySwitchShape, dataflow: str, devices: int, *, rescale: int = 0,
                   folded: bool = False, key_aligned: bool = False, key_rows: int | None = None) -> DeviceTraffic:
    """Towers / words / bytes each of ``devices`` limb-sharded devices receives for one key switch of ``shape``.

    Args:
        shape: the key switch (:class:`KeySwitchShape`; ``KeySwitchShape.from_params(params, level)`` for hemx).
        dataflow: "MP", "DC" or "OC" (any case).
        devices: ``D >= 1`` devices on the limb axis.
        rescale: towers dropped by a rescale after the key switch (0: none; ``params.primes_per_level`` after
            a multiplication with ``rescale=True``).
        folded: the rescale folded into ModDown (hemx's ``mul(..., rescale=True)``): one exchange of ``K + r``
            dropped towers instead of ModDown's ``K`` and a rescale's ``r`` (the same volume, one round less).
        key_aligned: the layout hemx's ``shard_map`` key switch runs (module docstring): adds the step
            ``"relayout"`` (:func:`relayout_towers`; one more round) and drops ModUp's exchange where ``D``
            does not divide ``l`` (the input is then replicated); a separate rescale is counted exactly
            (:func:`rescale_towers`). ``key_rows``: the key's rows (default ``K + l``).
    """
    flow = dataflow.upper()
    if flow not in DEVICE_DATAFLOWS:
        raise ParameterError(f"unknown dataflow {dataflow!r}; choose one of {DEVICE_DATAFLOWS}")
    if isinstance(devices, bool) or int(devices) != devices or devices < 1:
        raise ParameterError(f"devices must be a positive integer, got {devices!r}")
    if rescale < 0 or rescale >= shape.towers:
        raise ParameterError(f"rescale must drop between 0 and {shape.towers - 1} towers, got {rescale}")
    frac = (devices - 1) / devices
    l, k = shape.towers, shape.special
    steps = {"modup": l * frac, "moddown": 2 * k * frac, "rescale": 2 * rescale * frac}
    extra_round = 1 if rescale and not folded else 0
    if flow == "DC":
        rounds = shape.dnum + 1 + extra_round
        peak = max(max(shape.digit_sizes), 2 * (k + (rescale if folded else 0))) * frac
    else:
        rounds = 2 + extra_round
        peak = max(l, 2 * (k + (rescale if folded else 0))) * frac
    if key_aligned:
        steps["relayout"] = relayout_towers(shape, devices, key_rows=key_rows, rescale=rescale, folded=folded)
        if rescale and not folded:  # the separate rescale's one exchange, counted from the layouts
            separate = rescale_towers(l, rescale, devices)
            steps["rescale"] = separate["rescale"]
            steps["relayout"] += separate["relayout"]
        if l % devices:
            steps["modup"] = 0.0
        rounds += 1
    if devices == 1:
        rounds, peak = 0, 0.0
    return DeviceTraffic(flow, int(devices), steps, rounds, peak, shape.n, shape.word_bytes)


def device_traffic_all(shape: KeySwitchShape, devices: int, **kwargs) -> dict[str, DeviceTraffic]:
    """:func:`device_traffic` for every dataflow."""
    return {flow: device_traffic(shape, flow, devices, **kwargs) for flow in DEVICE_DATAFLOWS}
