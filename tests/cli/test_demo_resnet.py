"""``hemx demo --workload resnet``: the tiny residual test network at boot_12 end to end through the CLI (client
keygen -> key bytes -> server with evaluation keys only -> ciphertext bytes -> client), the JSON summary, the
summary table, and the errors of bad options and bad hand-over data."""

import gc
import json
import types

import numpy as np
import pytest

from hemx import cli, demo, io
from hemx.ckks import CKKSParameters, Sampler
from hemx.ckks.keys import EvaluationKeys, KeySet, SecretKey
from hemx.demo import resnet
from hemx.errors import KeyMismatchError, ParameterError, SecretMaterialError, SecurityError, SerializationError

from tests.helpers.ckks_helpers import INSECURE

TINY_ARGS = ["demo", "--workload", "resnet", "--model", "tiny", "--preset", "boot_12", "--allow-insecure"]


def _holds(root, cls, limit: int = 500_000) -> bool:
    """Whether an instance of ``cls`` is reachable from ``root`` (through objects, not modules or code)."""
    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType, types.FrameType)
    seen, todo = set(), [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        if isinstance(obj, cls):
            return True
        todo.extend(gc.get_referents(obj))
    return False


@pytest.mark.filterwarnings(INSECURE)
def test_tiny_network_through_the_cli(monkeypatch, capsys):
    """25-40 s on the 2-core development machine, 73 s beside a boot_16 job (3 bootstraps per image at boot_12;
    the first image compiles)."""
    checked = []

    def inspect(server, client):
        keys = server.service.keys
        assert type(keys) is EvaluationKeys and not isinstance(keys, KeySet) and not hasattr(keys, "secret")
        assert not _holds(server, SecretKey)  # nothing the server object reaches is a secret key
        assert _holds(client, SecretKey)  # (the walk does find one where there is one)
        checked.append(True)

    run = resnet.run_resnet
    monkeypatch.setattr(resnet, "run_resnet",
                        lambda **kw: run(inspect=inspect, sampler=Sampler.insecure_for_tests(28), **kw))
    assert cli.main([*TINY_ARGS, "--images", "2", "--json"]) == 0
    assert checked == [True]
    out = json.loads(capsys.readouterr().out)
    assert out["workload"] == "resnet" and out["model"] == "tiny" and out["preset"] == "boot_12"
    assert out["ok"] is True and out["predictions_equal"] is True and out["agreement"] == 1.0
    assert out["secure"] is False and "NOT 128-bit" in out["parameters"]
    assert out["images"] == 2 and len(out["image_seconds"]) == 2
    assert out["latency_per_image_s"] == out["image_seconds"][1] and out["first_image_s"] == out["image_seconds"][0]
    assert out["predictions"] == out["plaintext_predictions"] and len(set(out["predictions"])) == 2
    assert out["labels"] is None and out["accuracy_encrypted"] is None  # random test network: no labels
    assert out["bootstraps"] >= 1 and out["input_level"] == out["bootstrap_level"]
    assert out["rotations"] > 0 and out["rotation_keys"] > 0 and "bootstrap" in out["seconds_by_kind"]
    assert out["max_err_over_range"] < 1e-6  # measured 7.9e-9
    assert out["key_messages"] > 2 + out["rotation_keys"]  # + public, relinearization and the bootstrap's keys
    sizes = out["bytes"]
    assert out["key_bytes_in_memory"] > sizes["evaluation_keys"] > sizes["request_ciphertext"] > \
        sizes["reply_ciphertext"] > sizes["context"] > 0  # seeded keys: about half their size on the wire
    assert out["keygen_s"] > 0 and out["peak_rss_bytes"] > 0 and "server set-up" in out["seconds"]
    for key in ("backend", "device", "machine", "plan", "rotations", "seconds_by_layer"):
        assert key in out


@pytest.mark.filterwarnings(INSECURE)
def test_bad_options_raise_clear_errors(capsys):
    with pytest.raises(ParameterError, match="unknown model"):
        resnet.check_options("resnet50", 1, "boot_16", False)
    for images in (0, -1, True, 1.5):
        with pytest.raises(ParameterError, match="images must be a positive integer"):
            resnet.check_options("tiny", images, "boot_12", True)
    with pytest.raises(SecurityError, match="not 128-bit secure.*--allow-insecure"):
        resnet.check_options("tiny", 1, "boot_12", False)
    with pytest.raises(ParameterError, match="bootstrapping preset"):
        resnet.check_options("tiny", 1, "secure_16", False)
    with pytest.raises(ParameterError, match="unknown preset"):
        resnet.check_options("tiny", 1, "boot_99", True)
    with pytest.raises(ParameterError, match="16384 slots.*--model tiny"):
        resnet.check_options("resnet20", 1, "boot_13", True)
    with pytest.raises(ParameterError, match="at most"):
        resnet.load_model("tiny", resnet.MAX_TINY_IMAGES + 1)
    with pytest.raises(ParameterError, match="not 128-bit"):  # demo.run checks before any output
        demo.run("resnet", model="tiny", preset="boot_12")
    # the command line: the CLI's error line and exit status 2, before any work
    assert cli.main(["demo", "--workload", "resnet", "--model", "tiny", "--preset", "boot_12"]) == 2
    assert "hemx: error: preset 'boot_12' is not 128-bit secure" in capsys.readouterr().err
    assert cli.main([*TINY_ARGS, "--secure"]) == 2
    assert "--secure does not apply to --workload resnet" in capsys.readouterr().err
    assert cli.main([*TINY_ARGS, "--images", "0"]) == 2
    assert "images must be a positive integer" in capsys.readouterr().err
    for other in (["--model", "tiny"], ["--preset", "boot_12"], ["--allow-insecure"]):
        assert cli.main(["demo", "--workload", "cnn", *other]) == 2
        assert "applies to --workload resnet only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["demo", "--workload", "resnet", "--model", "resnet50"])


def test_cli_passes_the_options(monkeypatch):
    seen = {}
    monkeypatch.setattr(demo, "main", lambda workload, as_json=False, **options: seen.update(
        workload=workload, as_json=as_json, **options) or 0)
    assert cli.main(["demo", "--workload", "resnet"]) == 0
    assert seen == {"workload": "resnet", "as_json": False, "model": "resnet20", "preset": "boot_16",
                    "allow_insecure": False}
    seen.clear()
    assert cli.main([*TINY_ARGS, "--images", "3", "--json"]) == 0
    assert seen == {"workload": "resnet", "as_json": True, "model": "tiny", "preset": "boot_12",
                    "allow_insecure": True, "num_images": 3}
    assert "resnet" in demo.WORKLOAD_CHOICES


@pytest.mark.filterwarnings(INSECURE)
def test_bad_hand_over_data():
    client = resnet.ModelClient(CKKSParameters.preset("boot_12", allow_insecure=True),
                                sampler=Sampler.insecure_for_tests(29))
    with pytest.raises(ParameterError, match="keys"):
        client.encrypt(np.zeros(resnet.TINY_SHAPE))
    with pytest.raises(SerializationError, match="not JSON"):
        client.make_keys(b"\xff")
    with pytest.raises(SerializationError, match="bad key request"):
        client.make_keys(b'{"rotations": [1]}')
    with pytest.raises(SerializationError, match="'bootstrap' must be"):
        client.make_keys(b'{"rotations": [], "rotation_levels": {}, "bootstrap": 1}')
    with pytest.raises(SerializationError, match="bad interface|bad layout"):
        client.set_interface(b'{"input": {"shape": [1]}}')
    calibration = np.random.default_rng(0).normal(size=(2, *resnet.TINY_SHAPE))
    server = resnet.ModelServer(client.context_bytes(), resnet.tiny_graph(), calibration)
    with pytest.raises(ParameterError, match="no evaluation keys"):
        server.infer(b"")
    # the key messages: one hemx.io object per key; secret material, other objects, gaps and mixtures refused
    ctx = client.context
    keys, other = ctx.keygen(rotations=[1]), ctx.keygen(rotations=[1])
    (g,) = keys.galois
    public, relin, galois = (io.dumps(k, ctx) for k in (keys.public, keys.relin, keys.galois[g]))
    with pytest.raises(SecretMaterialError):
        server.load_evaluation_keys([public, io.dumps_secret_key(keys.secret, ctx)])
    with pytest.raises(SerializationError, match="expected evaluation keys, got a serialized context"):
        server.load_evaluation_keys([public, client.context_bytes()])
    with pytest.raises(SerializationError, match="no public key"):
        server.load_evaluation_keys([relin])
    for twice in (public, relin, galois):
        with pytest.raises(SerializationError, match="two"):
            server.load_evaluation_keys([public, relin, galois, twice])
    with pytest.raises(KeyMismatchError, match="different key sets"):
        server.load_evaluation_keys([public, relin, io.dumps(other.galois[g], ctx)])
    assert server.service is None
    server.load_evaluation_keys([public, relin, galois])
    assert type(server.service.keys) is EvaluationKeys and set(server.service.keys.galois) == {g}
    request = json.loads(server.key_request())
    assert set(request) == {"rotations", "rotation_levels", "bootstrap"} and request["bootstrap"] is True
    interface = json.loads(server.interface())
    assert interface["input"]["shape"] == list(resnet.TINY_SHAPE) and interface["output"]["shape"] == [4]
    assert interface["data_layout"] == "NCHW"  # the hand-built test network's (ResNet-20's, traced from JAX: NHWC)
    with pytest.raises(SerializationError, match="data_layout must be one of"):
        client.set_interface(json.dumps(dict(interface, data_layout="NWHC")).encode())


def test_summary_rows_with_labels():
    """The rows of a labelled run (ResNet-20's shape of summary, numbers made up)."""
    summary = {"workload": "resnet", "backend": "cpu", "device": "cpu", "machine": "m", "parameters": "boot_16: ...",
               "ntt": "native", "model_description": "ResNet-20, Fashion-MNIST 32x32", "secure": True, "images": 2,
               "slots": 32768, "layers": 52, "steps": 60, "input_level": 10, "bootstrap_level": 10,
               "bootstraps": 8, "bootstrapped_ciphertexts": 10, "rotations": 826, "rotation_keys": 87,
               "plaintext_mults": 10044, "ct_mults": 25, "key_bytes_in_memory": 10 << 30, "keygen_s": 60.0,
               "image_seconds": [180.0, 170.0], "latency_per_image_s": 170.0, "first_image_s": 180.0,
               "seconds_by_kind": {"linear": 100.0, "bootstrap": 60.0}, "max_err_over_range": 6e-8,
               "max_abs_logit_error": 1e-6, "agreement": 1.0, "accuracy_encrypted": 0.5, "accuracy_plaintext": 0.5,
               "peak_rss_bytes": 21 << 30, "seconds": {"client keygen": 60.0},
               "bytes": {"evaluation_keys": 5 << 30}}
    rows = dict(demo._summary_rows(summary))
    assert rows["security"] == "128-bit" and rows["predictions equal to plaintext"] == "2 / 2 (100.00 %)"
    assert rows["accuracy vs labels"] == "50.00 % encrypted / 50.00 % plaintext"
    assert rows["keys"].startswith("10.0 GiB on the server, 5.0 GiB sent")
    assert rows["latency per image"] == "170.0 s median after the first; the first 180.0 s (with compilation)"
    summary.update(images=1, image_seconds=[180.0], latency_per_image_s=180.0, agreement=0.0)
    rows = dict(demo._summary_rows(summary))
    assert rows["latency per image"] == "180.0 s (with compilation: one image)"
    assert rows["predictions equal to plaintext"] == "0 / 1 (0.00 %)"
    assert rows["server time by step kind"] == "linear 100.0 s, bootstrap 60.0 s"
    assert rows["peak RSS"] == "21.0 GiB" and rows["size: evaluation keys"] == "5.0 GiB"
