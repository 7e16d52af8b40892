"""Command buffers: with XLA's command buffers (CUDA graphs) enabled as far as its flags allow,
jitted code calling every op of the contract table gives correct results over repeated calls with
fresh inputs; and the handlers declare their traits truthfully: only a one-launch kernel handler
(JCM_KERNEL_HANDLER: XLA's stream only, no scratch, no lanes, no host synchronisation) may be
declared command-buffer compatible. A handler that forks onto lanes' streams and host threads,
or synchronises with the host, would be captured once and replayed wrong.

The source check runs anywhere (CPU CI); the run needs a GPU (a child interpreter, since
XLA_FLAGS is read once per process).
"""
import functools
import os
import re

import pytest

from _util import requires_gpu, run_python

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FFI = os.path.join(REPO, "ffi")
TRAIT = "kCmdBufferCompatible"
BINDING = re.compile(r"(#\s*define\s+)?\b(JCM_SOLVER_HANDLER|JCM_KERNEL_HANDLER|"
                     r"XLA_FFI_DEFINE_HANDLER_SYMBOL)\b")

# The command-buffer command types XLA_FLAGS may name; which ones an XLA accepts depends on its
# version (an unknown one aborts the process), so they are probed.
COMMAND_TYPES = ("FUSION", "CUBLAS", "CUBLASLT", "CUSTOM_CALL", "CUSOLVER", "COLLECTIVES",
                 "CONDITIONAL", "WHILE", "CUDNN", "DYNAMIC_SLICE_FUSION")


def _statement(text, start):
    """The text of a macro invocation (balanced parentheses) or #define (continued lines)."""
    if text.startswith("#", start) or text[start:start + 1].isspace():
        end = start
        while True:
            nl = text.find("\n", end)
            if nl < 0 or not text[:nl].rstrip().endswith("\\"):
                return text[start:nl if nl >= 0 else len(text)]
            end = nl + 1
    depth, i = 0, text.index("(", start)
    while True:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
        i += 1


def trait_violations(sources):
    """{file: [why]} for every kCmdBufferCompatible outside a kernel handler's binding.
    `sources`: {file name: text}."""
    bad = {}
    for name, text in sources.items():
        allowed = []  # spans of kernel-handler bindings that may carry the trait
        for m in BINDING.finditer(text):
            body = _statement(text, m.start())
            span = (m.start(), m.start() + len(body))
            if m.group(2) == "JCM_KERNEL_HANDLER":
                if "ScratchAllocator" in body:
                    bad.setdefault(name, []).append("a kernel handler binds the scratch "
                                                    "allocator")
                allowed.append(span)
            elif TRAIT in body:
                bad.setdefault(name, []).append(f"{m.group(2)} declares {TRAIT}: "
                                                f"{body.splitlines()[0][:100]}")
                allowed.append(span)  # reported once, here
        for m in re.finditer(TRAIT, text):
            if not any(a <= m.start() < b for a, b in allowed):
                line = text.count("\n", 0, m.start()) + 1
                bad.setdefault(name, []).append(f"{TRAIT} at line {line} outside a kernel "
                                                "handler's binding")
    return bad


def ffi_sources():
    out = {}
    for root, _, files in os.walk(FFI):
        for f in files:
            if f.endswith((".cc", ".h", ".cu", ".cuh")):
                path = os.path.join(root, f)
                with open(path) as fh:
                    out[os.path.relpath(path, REPO)] = fh.read()
    return out


def test_only_kernel_handlers_may_be_captured():
    sources = ffi_sources()
    assert any("JCM_SOLVER_HANDLER(" in t for t in sources.values()), "no handlers found"
    assert trait_violations(sources) == {}


def test_the_trait_check_catches_a_solver_handler():
    solver = ("JCM_SOLVER_HANDLER(jcm_x, x_handler,\n  .Arg<A>()\n"
              "  .Traits(xla::ffi::Traits::kCmdBufferCompatible));\n")
    kernel = ("JCM_KERNEL_HANDLER(jcm_k, k_handler, .Arg<A>(),\n"
              "  {xla::ffi::Traits::kCmdBufferCompatible});\n")
    direct = ("XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_m, m, Bind().Ctx<S>(),\n"
              "  {xla::ffi::Traits::kCmdBufferCompatible});\n")
    assert trait_violations({"k.cc": kernel}) == {}
    assert "k.cc" in trait_violations({"k.cc": kernel.replace(".Arg<A>()",
                                                              ".Ctx<ScratchAllocator>()")})
    assert "s.cc" in trait_violations({"s.cc": solver})
    assert "d.cc" in trait_violations({"d.cc": direct})
    assert "t.h" in trait_violations({"t.h": f"constexpr auto t = {TRAIT};\n"})


_PROBE = "import jax, jax.numpy as jnp; print(float(jax.jit(lambda x: x @ x + 1)(jnp.ones((8, 8)))[0, 0]))"


@functools.cache  # one probe per test process, not one per shard
def accepted_command_types():
    """The command types this XLA accepts in --xla_gpu_enable_command_buffer."""
    def ok(types):
        child = run_python(_PROBE, timeout=120,
                           XLA_FLAGS=f"--xla_gpu_enable_command_buffer={','.join(types)}")
        return child.rc == 0 and child.stdout.strip().endswith("9.0")
    if ok(COMMAND_TYPES):
        return COMMAND_TYPES
    return tuple(t for t in COMMAND_TYPES if ok((t,)))


_RUN = """
    import sys, functools
    sys.path[:0] = [{tests!r}]
    import conftest, jax, numpy as np
    from test_contract import OPS, strategies_of, run_options, assert_matches
    rng = np.random.default_rng(0)
    cases = failures = 0
    for i, op in enumerate(OPS):
        if i % {shards} != {shard}:
            continue
        dtype = np.dtype(op.dtypes[i % len(op.dtypes)])
        for s in strategies_of(op):
            call = functools.partial(op.call, **run_options(s, 4))
            # The op twice in one program, fed by XLA work: a captured graph replays all of it.
            f = jax.jit(lambda *a: (call(*a), call(*a)))
            for k in range(4):  # fresh inputs every call
                args = op.build(rng, dtype, (8,), 24)
                try:
                    out = f(*args)
                    ref = op.reference(*args)
                    for part in (0, 1):
                        assert_matches(op, args, out[part], ref, dtype, 1 if op.batched else 0,
                                       f"{{op}} {{s}} call {{k}} copy {{part}}")
                    cases += 1
                except ValueError as exc:
                    if "cannot run a" not in str(exc):
                        failures += 1; print("FAIL", op, s, k, repr(exc)[:300])
                    break
                except Exception as exc:
                    failures += 1; print("FAIL", op, s, k, repr(exc)[:300])
    print("CASES", cases, "FAILURES", failures)
"""


# The ops in shards, each its own child process: the test workers share them out, rather than
# one child running every op for minutes at the end of a run.
SHARDS = 4


@requires_gpu
@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_op_under_command_buffers(shard):
    types = accepted_command_types()
    assert "CUSTOM_CALL" in types, f"this XLA accepts only {types}"
    flags = (f"--xla_gpu_enable_command_buffer={','.join(types)} "
             "--xla_gpu_graph_min_graph_size=1")
    child = run_python(_RUN.format(tests=os.path.join(REPO, "tests"), shard=shard,
                                   shards=SHARDS), timeout=540, XLA_FLAGS=flags)
    assert child.rc == 0, child
    last = child.stdout.strip().splitlines()[-1]
    assert last.startswith("CASES") and last.endswith("FAILURES 0"), child
    assert int(last.split()[1]) > 0, child
