"""The extension's limits as Python sees them (_jcm_limits) and the strategy vocabulary: one
definition in C++ (ffi/core/limits.h), an infeasible explicit strategy rejected at lowering with
an error naming the op, `auto` never picking one, and explain() on any machine.

Everything here runs on a CPU: the CUDA lowering needs the extension's presence only.
"""
import threading
import warnings

import jax
import numpy as np
import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import _ffi, settings, strategy, tables
from jax_cusolver_ms.tables import Point, Table

from conftest import TINY_KERNEL_N, requires_extension

pytestmark = pytest.mark.skipif(_ffi.limits is None, reason="_jcm_limits is not built")

ROUTINES = ("getrf", "getrs", "potrf", "potrs", "geqrf", "orgqr", "ormqr", "sytrf", "sytrs",
            "syevd", "syevj", "geev", "gesvd", "gesvdj", "trsm", "sygvd")


# --- the one vocabulary ---------------------------------------------------------------------------

def test_the_strategies_are_the_extensions():
    exported = _ffi.limits.strategies()
    assert list(exported) == ["looped", "sequential", "batched", "blocked"]
    assert [s["value"] for s in exported.values()] == [0, 1, 2, 3]
    assert settings.STRATEGIES == ("auto",) + tuple(exported)
    assert strategy.strategy_values() == {name: s["value"] for name, s in exported.items()}
    assert {name for name, s in exported.items() if s["lanes"]} == {"looped", "batched"}
    assert settings.MAX_LANES == _ffi.limits.constants()["max_lanes"]


def test_every_routine_has_its_limits():
    routines = strategy.limits()
    assert set(routines) == set(ROUTINES)
    for name, limit in routines.items():
        assert limit["strategies"][:2] == ("looped", "sequential"), name
        assert ("batched" in limit["strategies"]) == bool(limit["batched"]), name
        assert ("blocked" in limit["strategies"]) == bool(limit["blocked"]), name
    assert {r for r, l in routines.items() if l["blocked"]} == {"getrf", "potrf", "sytrf", "sytrs",
                                                              "gesvd", "gesvdj"}
    assert {r for r, l in routines.items() if l["blocked_oblong_only"]} == {"gesvd", "gesvdj"}
    # sygvd's batched strategy is XsygvStridedBatched, built where the cuSOLVER has it.
    assert {r for r, l in routines.items() if not l["batched"]} - {"sygvd"} == {"gesvd"}
    constants = _ffi.limits.constants()
    assert routines["getrf"]["small_max_n"] == constants["getrf_small_max_n"]
    # The tiny kernels' tests cover every order they take.
    assert constants["lu_tiny_max_n"] == constants["cholesky_tiny_max_n"] == max(TINY_KERNEL_N)
    assert constants["syevj_tiny_max_n"] == constants["gesvdj_tiny_max_n"] == max(TINY_KERNEL_N)
    assert constants["qr_tiny_max_n"] == constants["geev_tiny_max_n"] == max(TINY_KERNEL_N)
    geev = routines["geev"]
    assert geev["batched_max_n"] == geev["small_max_n"] == max(TINY_KERNEL_N)
    assert constants["lu_tiny_max_nrhs"] == constants["cholesky_tiny_max_nrhs"] == 4
    assert routines["syevj"]["batched_max_n"] == constants["syevj_kernel_max_n"]
    assert routines["sytrf"]["batched_max_n"] == constants["ldl_kernel_max_n"]
    assert routines["geqrf"]["batched_max_n"] == constants["qr_kernel_max_n"]


def test_the_knobs_are_listed_with_their_defaults():
    knobs = _ffi.limits.knobs()
    assert set(knobs) == {"JCM_LU_BLOCK", "JCM_CHOLESKY_BLOCK"}
    assert knobs["JCM_LU_BLOCK"]["default"] == _ffi.limits.constants()["lu_block"]
    assert knobs["JCM_CHOLESKY_BLOCK"]["default"] == _ffi.limits.constants()["cholesky_block"]
    assert all(k["min"] <= k["default"] <= k["max"] and k["meaning"] for k in knobs.values())


@pytest.mark.parametrize("routine,strategy_,shape,nrhs,left,why", [
    ("geev", "batched", (64, 64), 0, True, "larger"),
    ("geev", "batched", (4, 4), 0, True, None),
    ("gesvd", "blocked", (64, 64), 0, True, "twice as tall as wide"),
    ("gesvdj", "blocked", (64, 33), 0, True, "twice as tall as wide"),
    ("gesvdj", "blocked", (64, 32), 0, True, None),
    ("gesvd", "blocked", (32, 2048), 0, True, None),
    ("geev", "blocked", (64, 64), 0, True, "no blocked"),
    ("getrf", "batched", (64, 60), 0, True, "square"),
    ("getrf", "blocked", (64, 60), 0, True, "square"),
    ("potrs", "batched", (128, 128), 2, True, "one right-hand side"),
    ("sytrf", "batched", (1025, 1025), 0, True, "larger"),
    ("syevj", "batched", (33, 33), 0, True, "larger"),
    ("gesvdj", "batched", (8, 129), 0, True, "larger"),
    ("ormqr", "batched", (4000, 8), 0, True, None),       # C's columns are what the kernel holds
    ("ormqr", "batched", (4000, 8), 0, False, "larger"),  # ... its rows, from the right
])
def test_infeasible_is_the_extensions_answer(routine, strategy_, shape, nrhs, left, why):
    got = strategy.infeasible(routine, strategy_, *shape, nrhs, left=left)
    assert (got is None) == (why is None) and (why is None or why in got), got


def test_the_small_kernels_make_batched_feasible():
    # potrsBatched takes one right-hand side, the one-launch kernel up to its limit.
    assert strategy.small_kernel("potrs", 32, 32, 5)
    assert strategy.infeasible("potrs", "batched", 32, 32, 5) is None
    assert "batched" not in strategy.feasible("potrs", 128, 128, 5)


def test_sizes_beyond_an_int_are_infeasible_where_the_api_takes_int():
    big = 46341  # big * big > 2^31 - 1
    routines = strategy.limits()
    assert routines["getrf"]["int_sizes"] == ("looped", "sequential", "batched", "blocked")
    assert routines["syevd"]["int_sizes"] == ("blocked",)  # the 64-bit generic API elsewhere
    assert "int" in strategy.infeasible("getrf", "looped", big, big)
    assert "int" in strategy.infeasible("potrs", "sequential", 2**31, 2**31, 1)
    assert "right-hand sides" in strategy.infeasible("getrs", "looped", 4096, 4096, 2**20)
    assert strategy.infeasible("getrf", "looped", 46340, 46340) is None
    assert strategy.infeasible("syevd", "looped", big, big) is None
    assert strategy.infeasible("syevd", "batched", big, big) is None
    assert strategy.infeasible("geev", "looped", big, big) is None
    # Batch counts: int in the batched APIs and kernels (the grid's x), not in the looped ones.
    assert "more matrices" in strategy.infeasible("getrf", "batched", 8, 8, batch=2**31)
    assert not strategy.small_kernel("getrf", 8, 8, batch=2**31)
    assert strategy.small_kernel("getrf", 8, 8, batch=2**31 - 1)
    assert strategy.infeasible("getrf", "looped", 8, 8, batch=2**31) is None
    # The LDL^T solve kernels take a block per 32 right-hand sides in the grid's y.
    most = _ffi.limits.constants()["max_grid_y"] * _ffi.limits.constants()[
        "ldl_solve_rhs_per_block"]
    assert strategy.infeasible("sytrs", "batched", 64, 64, most) is None
    assert "grid" in strategy.infeasible("sytrs", "batched", 64, 64, most + 1)


def test_auto_takes_jax_where_no_strategy_takes_the_size():
    plan = strategy.choose("getrf", 2, (46341, 46341), "float32")
    assert (plan.strategy, plan.source) == ("xla", "limits")
    plan = strategy.choose("sytrf", 1, (46341, 46341), "float32")  # JAX's: LAPACK on the host
    assert plan.strategy == "xla"
    plan = strategy.choose("getrf", 2**31, (8, 8), "float32")
    assert plan.strategy in ("looped", "sequential", "xla") and not plan.runs_small_kernel
    assert strategy.choose("syevd", 2, (46341, 46341), "float32").source != "limits"


def test_the_lowering_rejects_sizes_beyond_an_int(claim_extension):
    # Abstract operands: nothing of these sizes is allocated.
    big = jax.ShapeDtypeStruct((46341, 46341), np.float32)
    with pytest.raises(ValueError, match=r"^lu_factor: strategy 'looped' cannot run a 46341 x "
                                         r"46341 matrix: more elements in a matrix than an int"):
        jcm.explain("lu_factor", big.shape, np.float32, strategy="looped")
    with pytest.raises(ValueError, match="strategy 'sequential' cannot run a 46341 x 46341"):
        _lowered(lambda x: jcm.cholesky(x, strategy="sequential"), big)
    many = jax.ShapeDtypeStruct((2**31, 4, 4), np.float32)
    with pytest.raises(ValueError, match="more matrices than an int counts"):
        _lowered(lambda x: jcm.lu_factor(x, strategy="batched"), many)


def test_the_ffi_attribute_is_the_enum_value():
    for name, value in strategy.strategy_values().items():
        choice = strategy.Choice("getrf", 4, (8, 8), "float32", name, 2, "", "user")
        assert choice.ffi_attributes() == {"strategy": value, "lanes": 2}


# --- an infeasible explicit strategy is an error --------------------------------------------------

@pytest.mark.parametrize("op,shape,strategy_,nrhs,expect", [
    ("eig", (4, 64, 64), "batched", 1, "eig: strategy 'batched' cannot run a 64 x 64 matrix: "
                                       "the matrix is larger than the batched kernel takes "
                                       "(this project's tiny eigensolver"),
    ("lu_factor", (4, 64, 60), "blocked", 1, "lu_factor: strategy 'blocked'"),
    ("lu_factor", (4, 64, 60), "batched", 1, "square matrices only"),
    ("ldl_factor", (2, 1025, 1025), "batched", 1, "n <= 1024"),
    ("cho_solve", (4, 128, 128), "batched", 3, "with 3 right-hand side(s)"),
    ("cho_solve", (4, 128, 128), "blocked", 1, "no blocked algorithm"),
    ("svd", (4, 129, 129), "batched", 1, "svd: strategy 'batched'"),
    ("eigh", (4, 64, 64), "blocked", 1, "possible here: looped, sequential, batched"),
])
def test_explain_rejects_an_infeasible_strategy_naming_the_op(op, shape, strategy_, nrhs, expect):
    with pytest.raises(ValueError) as info:
        jcm.explain(op, shape, np.float32, strategy=strategy_, nrhs=nrhs)
    assert str(info.value).startswith(f"{op}: ") and expect in str(info.value), info.value


def test_explain_names_the_op_in_its_other_errors():
    with pytest.raises(ValueError, match="^lu_factor: lanes must be an int in"):
        jcm.explain("lu_factor", (4, 8, 8), np.float32, lanes=settings.MAX_LANES + 1)
    with pytest.raises(ValueError, match="^cho_solve: strategy must be one of"):
        jcm.explain("cho_solve", (4, 8, 8), np.float32, strategy="fast")
    with pytest.raises(TypeError, match="^lu_factor: unsupported dtype int32"):
        jcm.explain("lu_factor", (4, 8, 8), np.int32)
    with pytest.raises(TypeError, match="^matmul: unsupported dtype int8"):
        jcm.explain("matmul", (4, 8, 8), np.int8)
    with pytest.raises(ValueError, match="^qr: shape must have rank >= 2"):
        jcm.explain("qr", (8,), np.float32)


def _lowered(fn, *args):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def test_the_lowering_rejects_an_infeasible_strategy(claim_extension):
    a = np.ones((4, 64, 60), np.float32)
    with pytest.raises(ValueError, match=r"^getrf \(det, lu, lu_factor, slogdet\): strategy "
                                         "'blocked' cannot run a 64 x 60 matrix"):
        _lowered(lambda x: jcm.lu_factor(x, strategy="blocked"), a)
    with pytest.raises(ValueError, match="geev .*larger than the batched kernel takes"):
        _lowered(lambda x: jcm.eig(x, strategy="batched"), np.ones((4, 8, 8), np.float32))
    with jcm.config(strategy="blocked"), pytest.raises(ValueError, match="^potrs .*no blocked"):
        _lowered(lambda c, b: jcm.cho_solve((c, True), b), np.ones((4, 80, 80), np.float32),
                 np.ones((4, 80, 1), np.float32))


def test_the_lowering_carries_the_enum_value(claim_extension):
    a = np.eye(80, dtype=np.float32)[None].repeat(4, 0)
    for name, value in strategy.strategy_values().items():
        text = _lowered(lambda x: jcm.lu_factor(x, strategy=name, lanes=2), a)
        assert f"strategy = {value} : i32" in text, (name, text)


def test_a_composite_op_applies_blocked_to_its_factorization(claim_extension):
    # solve = getrf + getrs: getrs has no blocked algorithm and runs as `auto` picks.
    a, b = np.eye(80, dtype=np.float32)[None].repeat(4, 0), np.ones((4, 80, 2), np.float32)
    text = _lowered(lambda a, b: jcm.solve(a, b, strategy="blocked"), a, b)
    getrf = [line for line in text.splitlines() if "jcm_getrf" in line and "strategy" in line]
    assert getrf and all("strategy = 3 : i32" in line for line in getrf), getrf
    assert strategy.for_part("getrs", {"strategy": "blocked", "lanes": None})["strategy"] == "auto"
    assert strategy.for_part("getrs", {"strategy": "batched", "lanes": 2}) == \
        {"strategy": "batched", "lanes": 2}


# --- auto never picks an infeasible strategy ------------------------------------------------------

def _everything_table(routine, rng):
    names = ["xla", "sequential", "blocked", "looped:2", "looped:8", "batched:1", "batched:4"]
    points = [Point(b, n, {c: float(rng.lognormal(0, 1)) for c in names})
              for b in (1, 4, 64) for n in (16, 64, 256, 1024, 2048)]
    return Table("Fake GPU", "shipped table Fake GPU", {(routine, "float32"): points})


@pytest.mark.parametrize("routine", ROUTINES)
def test_auto_never_picks_an_infeasible_strategy(routine, rng):
    # A table that measured every candidate everywhere (as a table of another build might have):
    # auto still takes only what the extension can run for the call.
    shapes = [(n, n) for n in (8, 33, 64, 65, 512, 1025, 2048)] + [(512, 400), (400, 512)]
    for table in (None, _everything_table(routine, rng)):
        with tables.using(*([table] if table else [])):
            for batch in (1, 4, 64):
                for shape in shapes:
                    for nrhs in ((1, 3) if routine in strategy._SOLVES else (0,)):
                        choice = strategy.choose(routine, batch, shape, "float32", nrhs=nrhs)
                        if choice.strategy != "xla":
                            assert strategy.infeasible(routine, choice.strategy, *shape,
                                                       nrhs) is None, (choice, shape, nrhs)


def test_table_overrides_are_per_thread():
    # One thread inside `using` (explain(gpu=...) is one) leaves another thread's `auto` alone.
    points = [Point(b, n, {"xla": 9.0, "sequential": 1.0, "looped:8": 9.0, "batched:1": 9.0})
              for b in (4, 64) for n in (64, 512)]
    table = Table("Fake GPU", "shipped table Fake GPU", {("getrf", "float32"): points})
    inside, seen = threading.Event(), threading.Event()
    other = {}

    def overriding():
        with tables.using(table):
            other["inside"] = strategy.choose("getrf", 16, (128, 128), "float32").source
            inside.set()
            seen.wait(timeout=60)

    def reading():
        inside.wait(timeout=60)
        other["active"] = tables.active()
        other["source"] = strategy.choose("getrf", 16, (128, 128), "float32").source
        seen.set()

    threads = [threading.Thread(target=overriding), threading.Thread(target=reading)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert other["inside"] == table.source
    assert table not in other["active"] and other["source"] != table.source
    # This thread's own override (conftest's `using()`: the heuristic) is untouched too.
    assert tables.active() == () and strategy.choose("getrf", 16, (128, 128), "float32").source \
        == "unmeasured"


# --- explain() ------------------------------------------------------------------------------------

def test_explain_says_what_runs_here():
    plan = jcm.explain("lu_factor", (4, 128, 128), np.float32)
    if jcm.gpu_available():
        assert plan.fallback == ""
    else:
        assert "JAX's own" in plan.fallback and "here: " in str(plan)
    # For a named GPU model: what runs there, whatever this machine has.
    assert jcm.explain("lu_factor", (16, 2048, 2048), np.float32,
                       gpu="NVIDIA H100 80GB HBM3").fallback == ""


def test_explain_warns_where_no_table_is_shipped():
    with pytest.warns(UserWarning, match="lu_factor: no strategy table is shipped for the GPU "
                                         "model 'No Such GPU'"):
        plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32, gpu="No Such GPU")
    assert plan.source == "unmeasured"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jcm.explain("lu_factor", (16, 2048, 2048), np.float32, gpu="NVIDIA H100 80GB HBM3")


def test_explain_covers_matmul():
    plan = jcm.explain("matmul", (8, 64, 32), "bfloat16")
    assert (plan.op, plan.batch, plan.shape, plan.dtype) == ("matmul", 8, (64, 32), "bfloat16")
    assert "cuBLASLt" in plan.reason and plan.lanes == 1
    with pytest.raises(ValueError, match="^matmul: takes no strategy or lanes"):
        jcm.explain("matmul", (8, 64, 32), np.float32, strategy="looped")


def test_without_the_limits_module_everything_is_jax(monkeypatch):
    # A source checkout without a build: no limits, and every op runs JAX's own.
    monkeypatch.setattr(_ffi, "limits", None)
    plan = strategy.choose("getrf", 4, (8, 8), "float32")
    assert (plan.strategy, plan.source) == ("xla", "no extension")
    assert not strategy.small_kernel("getrf", 8, 8)
    assert jcm.explain("lu_factor", (4, 8, 8), np.float32).fallback == \
        "JAX's own implementation runs"
    x = jcm.lu_factor(np.eye(3, dtype=np.float32) * 2)[0]
    np.testing.assert_allclose(np.asarray(x), np.eye(3) * 2)


@requires_extension
def test_the_cuda_module_and_the_limits_agree():
    assert _ffi._ext.max_lanes == settings.MAX_LANES
