"""hemx: CKKS homomorphic encryption on matrix engines, in JAX."""

from hemx._version import __version__  # noqa: E402,F401  (one place; layers below read hemx._version)

from hemx import errors, nt  # noqa: E402
from hemx import kernels  # noqa: E402  (enables 64-bit JAX types)
from hemx import ring  # noqa: E402
from hemx import ckks  # noqa: E402
from hemx.ckks import CKKSParameters, Context, KeySet, Ciphertext, Plaintext  # noqa: E402
from hemx import circuits  # noqa: E402
from hemx.circuits.bootstrap import BootstrapParameters  # noqa: E402  (a bootstrap's plan and keys: docs/bootstrap.md)
from hemx.circuits import EncryptedArray  # noqa: E402  (numpy-like encrypted arrays: docs/ckks.md)
from hemx.circuits.program import Program, jit  # noqa: E402  (programs kept across key sets and processes)
from hemx import io  # noqa: E402
from hemx.service import Client, Server  # noqa: E402
from hemx import compilation_cache  # noqa: E402

compilation_cache.configure()  # JAX's persistent compilation cache (HEMX_COMPILATION_CACHE=0: off)

__all__ = [
    "errors", "nt", "kernels", "ring", "ckks", "circuits",
    "CKKSParameters", "Context", "KeySet", "Ciphertext", "Plaintext", "EncryptedArray", "BootstrapParameters",
    "__version__",
]
__all__ += ["io", "Client", "Server", "jit", "Program"]
