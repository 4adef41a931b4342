"""TrainConfig.precision and TrainConfig.compile: cache identity, exactness where it must be exact (tf32 on the CPU),
bounded bf16 error with fp32 master weights, no leak of the global TF32 flags, compiled == eager."""
import warnings

import pandas as pd
import pytest
import torch

import nhtlib as nht
from nhtlib.config import ConfigError
from nhtlib.data import stack_members
from nhtlib.engine.precision import precision_context, tf32_flags
from nhtlib.engine.train import train

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=20, n_train=200, n_test=500)
MODEL = nht.models.config("mlp", hidden=(64,))
SEEDS = [0, 1, 2]
WEIGHT_DECAYS = [0.0, 0.1, 1.0]


def tf32_state():
    """Every global TF32 setting PyTorch keeps: the two legacy switches and the per-op strings (torch >= 2.9)."""
    per_op = [getattr(o, "fp32_precision", None) for o in
              (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
              if hasattr(torch.backends.cudnn, "conv")]
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, per_op


@pytest.fixture(autouse=True)
def restore_tf32_state():
    """Tests here set the global flags on purpose; leave them as PyTorch's defaults for the other test files."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def train_members(cfg: nht.TrainConfig, *, seeds=SEEDS, model_cfg=MODEL, task=TASK, hook=None, device="cpu"):
    """(tables without wall_s, trained model) for members `seeds` trained at cfg on `device`."""
    data = stack_members([task.build(s) for s in seeds]).to(device)
    model = model_cfg.build(data.input_shape, data.n_classes, seeds).to(device)
    if hook is not None:
        model.register_forward_hook(hook)
    tables = train(model, data, cfg, seeds=seeds, weight_decays=WEIGHT_DECAYS[:len(seeds)], progress=False)
    return [t.drop(columns=["wall_s"]) for t in tables], model


# --- cache identity and validation -------------------------------------------------------------------------------

def test_precision_is_part_of_the_cache_key_and_compile_is_not():
    base = nht.RunConfig(TASK, MODEL, nht.TrainConfig(steps=10))
    bf16 = base.replace(train=base.train.replace(precision="bf16"))
    assert base.to_dict()["train"]["precision"] == "fp32" and bf16.to_dict()["train"]["precision"] == "bf16"
    assert base.to_dict() != bf16.to_dict() and base.digest() != bf16.digest()
    assert base.batch_signature() != bf16.batch_signature()  # never trained in one batch either
    compiled = base.replace(train=base.train.replace(compile=True))
    assert "compile" not in compiled.to_dict()["train"] and compiled.digest() == base.digest()


def test_unknown_precision_names_the_allowed_values():
    with pytest.raises(ConfigError, match=r"precision='fp16'.*'fp32', 'tf32', 'bf16'"):
        nht.TrainConfig(precision="fp16")
    with pytest.raises(ConfigError, match="compile"):
        nht.TrainConfig(compile="yes")
    with pytest.raises(ConfigError, match="precision"):
        with precision_context("half", "cpu"):
            pass


# --- tf32 -------------------------------------------------------------------------------------------------------

def test_tf32_on_the_cpu_gives_exactly_the_fp32_tables():
    cfg = nht.TrainConfig(steps=60, n_logs=6, lr=1e-2, batch_size=32)
    fp32, _ = train_members(cfg)
    tf32, _ = train_members(cfg.replace(precision="tf32"))
    for a, b in zip(fp32, tf32):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("precision, on_inside", [("tf32", True), ("fp32", False), ("bf16", False)])
def test_train_sets_the_tf32_flags_of_its_precision_and_restores_them(precision, on_inside):
    # known values that differ from PyTorch's defaults (matmul off, cuDNN on) and from what train() sets
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = (not on_inside), (not on_inside)
    before = tf32_state()
    seen = []

    def record_flags(module, args, output):
        seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))

    train_members(nht.TrainConfig(steps=3, n_logs=1, precision=precision), seeds=[0], hook=record_flags)
    assert seen and set(seen) == {(on_inside, on_inside)}  # training and evaluation forwards alike
    assert tf32_state() == before


def test_tf32_flags_are_restored_when_the_code_inside_raises():
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True
    before = tf32_state()
    with pytest.raises(KeyError):
        with tf32_flags(True):
            assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
            raise KeyError("boom")
    assert tf32_state() == before


# --- bf16 -------------------------------------------------------------------------------------------------------

def test_bf16_keeps_fp32_master_weights_and_stays_close_to_fp32():
    """300 AdamW steps (lr 1e-3, batch 32) of 3 members of a 64-unit MLP on 20-bit sparse parity.

    Measured on this CPU (torch 2.14): every logged train loss of bf16 within 0.4 % (relative) of fp32's, final
    train losses 0.14-0.17, accuracies within 0.005 (one training example in 200). The tolerances below leave a
    margin of about 10x (loss) and 4x (accuracy)."""
    cfg = nht.TrainConfig(steps=300, n_logs=10, lr=1e-3, batch_size=32)
    fp32, _ = train_members(cfg)
    logit_dtypes = set()
    bf16, model = train_members(cfg.replace(precision="bf16"),
                                hook=lambda module, args, output: logit_dtypes.add(output.dtype))
    assert logit_dtypes == {torch.bfloat16}  # autocast was on in every forward, training and evaluation
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    for a, b in zip(fp32, bf16):
        assert not a.train_loss.equals(b.train_loss)  # bf16 did change the numbers
        assert b.train_loss.dtype == "float64" and b.train_loss.notna().all()
        rel = ((a.train_loss - b.train_loss).abs() / a.train_loss).max()
        assert rel < 0.05, f"bf16 train loss differs from fp32 by {rel:.2%} (relative)"
        for column in ("train_acc", "test_acc"):
            assert (a[column] - b[column]).abs().max() <= 0.02, column


def test_member_loss_of_bf16_logits_is_computed_in_fp32():
    logits = torch.randn(3, 7, 5, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    y = torch.randint(0, 5, (3, 7), generator=torch.Generator().manual_seed(1))
    loss = nht.train.member_loss(logits, y)
    assert loss.dtype == torch.float32
    assert torch.equal(loss, nht.train.member_loss(logits.float(), y))  # the bf16 logits, cast up exactly


def test_bf16_optimiser_state_stays_fp32():
    data = stack_members([TASK.build(s) for s in SEEDS])
    model = MODEL.build(data.input_shape, data.n_classes, SEEDS)
    captured = {}
    original = nht.train.make_optimizer

    def keep_optimizer(*args, **kwargs):
        captured["opt"] = original(*args, **kwargs)
        return captured["opt"]

    nht.train.make_optimizer = keep_optimizer
    try:
        train(model, data, nht.TrainConfig(steps=5, n_logs=1, precision="bf16"), seeds=SEEDS, progress=False)
    finally:
        nht.train.make_optimizer = original
    opt = captured["opt"]
    assert opt.step_count == 5
    assert {t.dtype for t in opt.exp_avg + opt.exp_avg_sq} == {torch.float32}
    assert {p.grad.dtype for p in model.parameters() if p.grad is not None} == {torch.float32}


def test_extra_metrics_run_in_plain_fp32_under_bf16():
    data = stack_members([TASK.build(s) for s in SEEDS[:2]])
    model = MODEL.build(data.input_shape, data.n_classes, SEEDS[:2])
    seen = []

    @torch.no_grad()
    def probe(model, data):
        out = model(data.splits["test"].x[:, :8])  # per-member split (every seed draws its own points): (K, 8, 20)
        seen.append((out.dtype, torch.is_autocast_enabled("cpu")))
        return {"probe_mean": out.double().mean((1, 2))}

    train(model, data, nht.TrainConfig(steps=2, n_logs=1, precision="bf16"), seeds=SEEDS[:2], extra_metrics=probe,
          progress=False)
    assert seen == [(torch.float32, False)] * 2  # logged at steps 0 and 2


# --- compile ----------------------------------------------------------------------------------------------------

def compile_unavailable() -> str | None:
    """Why torch.compile cannot run here (None when it can): a trivial function must compile and run."""
    try:
        out = torch.compile(lambda t: t * 2 + 1)(torch.ones(3))
    except Exception as error:  # no C++ compiler, unsupported Python, ...
        return f"torch.compile is unavailable here: {type(error).__name__}: {error}"
    return None if torch.equal(out, torch.full((3,), 3.0)) else "torch.compile returned a wrong result"


def test_compiled_training_equals_eager():
    reason = compile_unavailable()
    if reason:
        pytest.skip(reason)
    torch._dynamo.reset()  # compile afresh: no graph of an earlier test is reused
    model_cfg = nht.models.config("mlp", hidden=(32,))
    cfg = nht.TrainConfig(steps=20, n_logs=4, lr=1e-2, batch_size=16)
    eager, _ = train_members(cfg, seeds=[0, 1], model_cfg=model_cfg)
    graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    compiled, _ = train_members(cfg.replace(compile=True), seeds=[0, 1], model_cfg=model_cfg)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > graphs_before  # the compiled forward did run
    for a, b in zip(eager, compiled):
        assert list(a.columns) == list(b.columns) and list(a.step) == list(b.step)
        for column in [c for c in a.columns if c.endswith("_loss") or c.startswith("norm_sq")]:
            pd.testing.assert_series_equal(a[column], b[column], rtol=1e-5, atol=0.0, check_exact=False)
        for column in ("train_acc", "test_acc"):  # one example may flip on a near-tie
            assert (a[column] - b[column]).abs().max() <= 0.01, column


# --- host synchronisation (CUDA only) ---------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: host synchronisation is a device matter")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_no_host_synchronisation_between_log_steps_on_cuda(precision):
    """PyTorch's sync debug mode warns at every synchronising CUDA call; with the same 3 log steps, 10 and 30
    training steps must synchronise equally often (the step loop itself never waits for the device)."""
    def synchronisations(steps: int) -> int:
        cfg = nht.TrainConfig(steps=steps, n_logs=2, lr=1e-3, batch_size=32, precision=precision)
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                train_members(cfg, device="cuda")
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return sum("synchroniz" in str(w.message) for w in caught)

    synchronisations(4)  # warm-up: CUDA context, cuBLAS handles, first allocations
    assert synchronisations(10) == synchronisations(30)
