"""dynlab's cells as PyTorch modules (``dl.to_torch``, ``dynlab.torch``), against dynlab itself.

For every model dynlab has (each cell and variant at small sizes, B = 3, T = 6, D = 4):

* forward — the module's outputs and final state against ``dl.simulate`` (the numba backend),
  float64, to 1e-12 relative: both compute the same formulas in the same order, so what is seen is
  summation-order rounding (≈ 1e-16 per step, ≈ 1e-15 over the run);
* gradients — a loss written by a PyTorch user (a linear read-out of the last output, MSE; and of
  every output, cross-entropy) through ``loss.backward()``, every parameter's and the initial
  state's gradient against dynlab's exact BPTT (``dynlab.train.backprop.loss_and_grads``), to 1e-10
  relative to the array's largest entry (the issue's bound; seen ≈ 1e-15).  The CTRNN, which
  dynlab's BPTT does not cover, is checked on ∂L/∂h_0 and ∂L/∂x against the chain of dynlab's
  closed-form step Jacobians (1e-10) and on its parameters against central differences of
  ``dl.simulate`` (1e-7: δ = 1e-5, truncation ≈ δ² ≈ 1e-10, rounding ≈ 1e-16/δ ≈ 1e-11);
  implicit networks against ``dl.implicit_vjp`` (1e-10) and central differences (1e-7);
* the round trip — ``dl.from_torch`` of the module gives every parameter back bit for bit
  (float64; float32 modules give the float32 rounding of each) and the same settings, and the
  module's ``state_dict`` saved with safetensors (and with ``numpy.savez``) loads with
  ``dl.load_model`` into the same model.

Every test here needs torch (marker ``torch``: the CI's torch job runs exactly these).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import battery  # noqa: E402
import dynlab as dl  # noqa: E402
import dynlab.torch as dt  # noqa: E402
from dynlab.errors import ParameterError  # noqa: E402
from dynlab.train import backprop as bp  # noqa: E402

pytestmark = pytest.mark.torch

B, T, D, d = 3, 6, 4, 2
FWD_TOL, GRAD_TOL = 1e-12, 1e-10

#: The common battery's sequence models (tests/battery.py; a CTRNN by scipy has no module), and
#: beside them: a leak other than the default, a GRU and an LSTM with another activation (dynlab's own
#: modules, not PyTorch's), stacks of tanh RNN cells (PyTorch's nn.RNN) and of identity-initialised
#: ReLU cells (dynlab's Stack).
EXTRA = {
    "rnn-leaky": ("rnn", {"activation": "leaky-relu", "leak": 0.1}),
    "gru-relu": ("gru", {"activation": "relu"}),
    "lstm-sigmoid": ("lstm", {"activation": "sigmoid"}),
    "stack-rnn-tanh": ("stack-rnn", {"activation": "tanh"}),
    "stack-rnn-relu": ("stack-rnn", {"activation": "relu", "identity_init": True, "weight_scale": 1.0}),
}
CASES = battery.names("cell", "irnn", "ctrnn", "gated", "stack-gated", "stack-cell") + list(EXTRA)
#: the module each case becomes
KINDS = {"gru": "GRU", "lstm": "LSTM", "stack-rnn-tanh": "RNN", "stack-rnn-relu": "Stack", "stack-gru": "GRU",
         "stack-lstm": "LSTM", "stack-rnn": "Stack", "stack-lstm-mixed": "Stack"}


def _model(case):
    name, kw = EXTRA.get(case, (case, {}))
    return battery.build(name, D, d, T, **kw)


def _data(model, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((B, T, d)), 0.3 * rng.standard_normal((B, model.state_size))


def _hx(module, model, h0):
    """dynlab's initial state (B, n) in the module's own layout (PyTorch's (L, B, D) and (h, c))."""
    s = torch.tensor(h0, requires_grad=True)
    if isinstance(module, dt.DynlabModule):
        return s, s
    L = module.num_layers
    if isinstance(module, torch.nn.LSTM):
        hc = s.reshape(B, L, 2, model.hidden)
        return s, (hc[:, :, 0].transpose(0, 1).contiguous(), hc[:, :, 1].transpose(0, 1).contiguous())
    return s, s.reshape(B, L, model.hidden).transpose(0, 1).contiguous()


def _final_state(module, model, h_n):
    """The module's final state in dynlab's layout (B, n)."""
    if isinstance(module, dt.DynlabModule):
        return h_n[0]
    if isinstance(module, torch.nn.LSTM):
        h, c = h_n
        return torch.stack([h, c], dim=2).transpose(0, 1).reshape(B, -1)
    return h_n.transpose(0, 1).reshape(B, -1)


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


@pytest.mark.parametrize("case", CASES)
def test_forward_equals_simulate(case):
    m = _model(case)
    x, h0 = _data(m)
    ref = dl.simulate(m, x, h0).h.values                         # (B, T, n)
    module = dl.to_torch(m, batch_first=True)
    assert type(module).__name__ == KINDS.get(case, type(module).__name__)
    assert isinstance(module, torch.nn.Module) and module.training
    _, hx = _hx(module, m, h0)
    out, h_n = module(torch.tensor(x), hx)
    assert _rel(out.detach().numpy(), ref[..., m.output_slice]) <= FWD_TOL
    assert _rel(_final_state(module, m, h_n).detach().numpy(), ref[:, -1]) <= FWD_TOL
    if isinstance(module, dt.DynlabModule):   # time-major and unbatched layouts give the same numbers
        tm = dl.to_torch(m)
        out_tm, _ = tm(torch.tensor(x).transpose(0, 1), torch.tensor(h0))
        np.testing.assert_array_equal(out_tm.transpose(0, 1).detach().numpy(), out.detach().numpy())
        one, hn1 = tm(torch.tensor(x[1]), torch.tensor(h0[1]))
        assert one.shape == (T, m.hidden) and hn1.shape == (1, m.state_size)
        assert _rel(one.detach().numpy(), ref[1][:, m.output_slice]) <= FWD_TOL


def _user_loss(module, model, x, h0, readout, labels, target):
    """A PyTorch user's loss: MSE of a read-out of the last output plus cross-entropy at every step."""
    s, hx = _hx(module, model, h0)
    out, _ = module(torch.tensor(x), hx)                          # (B, T, hidden)
    Wo, bo = (torch.tensor(readout[k], requires_grad=True) for k in ("W_out", "b_out"))
    y = out @ Wo.t() + bo
    mse = ((y[:, -1] - torch.tensor(target)) ** 2).mean()
    ce = torch.nn.functional.cross_entropy(y.reshape(-1, y.shape[-1]), torch.tensor(labels).reshape(-1))
    return mse, ce, s, Wo, bo


def _dynlab_grads(module, model):
    """The module's parameter gradients under dynlab's names (an nn.RNN's b is bias_ih)."""
    from dynlab.torch.convert import Net

    return {name: p.grad.numpy() for name, p in Net(module, model).pairs}


@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("ctrnn")])
def test_autograd_equals_exact_bptt(case):
    m = _model(case)
    x, h0 = _data(m)
    rng = np.random.default_rng(1)
    readout = {"W_out": rng.standard_normal((3, m.hidden)), "b_out": rng.standard_normal(3)}
    labels, target = rng.integers(0, 3, (B, T)), rng.standard_normal((B, 3))
    for which in ("mse", "ce-seq"):
        module = dl.to_torch(m, batch_first=True)
        for p in module.parameters():
            p.requires_grad_(True)                              # α of the iRNN too: dynlab returns its gradient
        mse, ce, s, Wo, bo = _user_loss(module, m, x, h0, readout, labels, target)
        L = mse if which == "mse" else ce
        L.backward()
        Lr, g, _ = bp.loss_and_grads(m, readout, x, target if which == "mse" else labels, loss=which, h0=h0)
        assert abs(L.item() - Lr) <= FWD_TOL * abs(Lr)
        got = _dynlab_grads(module, m)
        got.update(W_out=Wo.grad.numpy(), b_out=bo.grad.numpy(), h0=s.grad.numpy())
        assert set(got) == set(m.params()) | {"W_out", "b_out", "h0"}
        for k, v in got.items():
            assert _rel(v, g[k]) <= GRAD_TOL, (which, k, _rel(v, g[k]))


@pytest.mark.parametrize("case", ["ctrnn-rk4", "ctrnn-euler"])
def test_ctrnn_gradients_equal_the_jacobian_chain_and_finite_differences(case):
    """dL/dh_0 and dL/dx_t against the product of dynlab's closed-form step Jacobians J_t, Jx_t
    along the trajectory; the parameters' gradients against central differences of dl.simulate."""
    m = _model(case)
    x, h0 = _data(m)
    c = np.random.default_rng(2).standard_normal(D)
    module = dl.to_torch(m, batch_first=True)
    xt = torch.tensor(x, requires_grad=True)
    s = torch.tensor(h0, requires_grad=True)
    out, _ = module(xt, s)
    (out[:, -1] @ torch.tensor(c)).sum().backward()             # L = Σ_b c·h_T
    H = dl.simulate(m, x, h0).h.values
    prev = np.concatenate([h0[:, None], H[:, :-1]], axis=1)
    J, Jx = dl.jacobian_at(m, x.reshape(-1, d), prev.reshape(-1, D), inputs=True)
    J, Jx = J.reshape(B, T, D, D), Jx.reshape(B, T, D, d)
    lam = np.broadcast_to(c, (B, D)).copy()                     # ∂L/∂h_t, from t = T down
    gx = np.zeros_like(x)
    for t in range(T - 1, -1, -1):
        gx[:, t] = np.einsum("bi,bij->bj", lam, Jx[:, t])
        lam = np.einsum("bi,bij->bj", lam, J[:, t])
    assert _rel(s.grad.numpy(), lam) <= GRAD_TOL
    assert _rel(xt.grad.numpy(), gx) <= GRAD_TOL

    def loss(model):
        return float(np.sum(dl.simulate(model, x, h0).h.values[:, -1] @ c))

    for name, p in module.named_parameters():
        base = np.array(m.params()[name], dtype=float)
        fd = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            e = np.zeros_like(base)
            e[i] = 1e-5
            fd[i] = (loss(m.replace(**{name: base + e})) - loss(m.replace(**{name: base - e}))) / 2e-5
        assert _rel(p.grad.numpy(), fd) <= 1e-7, name


@pytest.mark.parametrize("hidden2", [0, 2])
@pytest.mark.parametrize("gradient", ["exact", "semi"])
def test_implicit_equilibrium_and_implicit_function_backward(hidden2, gradient):
    m = dl.make_model("implicit", 3, 2, hidden2=hidden2, seed=4, weight_scale=1.5)
    X = np.random.default_rng(3).standard_normal((5, 2))
    module = dl.to_torch(m)
    module.gradient = gradient
    assert isinstance(module, dt.Implicit)
    Xt = torch.tensor(X, requires_grad=True)
    Z = module.equilibrium(Xt)
    ref = dl.implicit_equilibrium(m, X)
    assert _rel(Z.detach().numpy(), ref.h_eq.values) <= FWD_TOL
    np.testing.assert_array_equal(module(Xt).detach().numpy(), Z.detach().numpy()[:, m.outputs])
    dZ = np.random.default_rng(5).standard_normal(Z.shape)
    (Z * torch.tensor(dZ)).sum().backward()
    want = dl.implicit_vjp(m, X, ref.h_eq.values, dZ, gradient=gradient)
    for name, p in module.named_parameters():
        assert _rel(p.grad.numpy(), want[name]) <= GRAD_TOL, name
    if gradient == "exact":   # independent of dynlab's vjp: central differences of the equilibrium
        def loss(model):
            return float(np.sum(dl.implicit_equilibrium(model, X).h_eq.values * dZ))

        for name, p in module.named_parameters():
            base = np.array(m.params()[name], dtype=float)
            fd = np.zeros_like(base)
            for i in np.ndindex(base.shape):
                e = np.zeros_like(base)
                e[i] = 1e-5
                fd[i] = (loss(m.replace(**{name: base + e})) - loss(m.replace(**{name: base - e}))) / 2e-5
            assert _rel(p.grad.numpy(), fd) <= 1e-7, name


def _same_model(a, b):
    assert type(a) is type(b) and list(a.params()) == list(b.params())
    for k, v in a.params().items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(b.params()[k]), err_msg=k)
    for la, lb in zip(a.layers if isinstance(a, dl.Stack) else [a], b.layers if isinstance(b, dl.Stack) else [b]):
        for k in ("activation", "K", "g0", "sign", "P", "method", "dt", "substeps"):
            assert getattr(la, k, None) == getattr(lb, k, None), k


@pytest.mark.parametrize("case", list(CASES) + ["implicit"])
def test_round_trip_and_state_dict_files(case, tmp_path):
    st = pytest.importorskip("safetensors.torch")
    m = dl.make_model("implicit", 3, 2, hidden2=2, seed=1) if case == "implicit" else _model(case)
    module = dl.to_torch(m)
    back = dl.from_torch(module)
    _same_model(back, m)
    if isinstance(module, dt.DynlabModule):     # dynlab's own settings come back too (seed, init, …)
        assert back.seed == m.seed and getattr(back, "init", None) == getattr(m, "init", None)
    sd = module.state_dict()
    st.save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / "m.safetensors"))
    _same_model(dl.load_model(tmp_path / "m.safetensors"), m)
    np.savez(tmp_path / "m.npz", **{k: v.numpy() for k, v in sd.items()})
    _same_model(dl.load_model(tmp_path / "m.npz"), m)
    # float32: each parameter rounded once
    m32 = dl.from_torch(dl.to_torch(m, dtype="float32"))
    for k, v in m.params().items():
        np.testing.assert_array_equal(np.asarray(m32.params()[k]), np.asarray(v, dtype=np.float32).astype(float))


def test_module_inside_a_network_saves_and_loads_by_prefix(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    m = dl.make_model("irnn", D, d, K=2, rank=2, P="U", eta=0.2, seed=3)
    net = torch.nn.ModuleDict({"cell": dl.to_torch(m), "fc": torch.nn.Linear(D, 3).double()})
    st.save_file(net.state_dict(), str(tmp_path / "net.safetensors"))
    _same_model(dl.load_model(tmp_path / "net.safetensors"), m)
    _same_model(dl.load_model(tmp_path / "net.safetensors", prefix="cell"), m)
    net["gru"] = torch.nn.GRU(d, D)
    st.save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(tmp_path / "two.safetensors"))
    with pytest.raises(ParameterError, match="several recurrent modules") as info:
        dl.load_model(tmp_path / "two.safetensors")
    assert "'cell.'" in str(info.value) and "'gru.'" in str(info.value)
    _same_model(dl.load_model(tmp_path / "two.safetensors", prefix="cell."), m)
    assert dl.load_model(tmp_path / "two.safetensors", prefix="gru.").name == "gru"


def test_load_state_dict_checks_the_settings():
    a = dt.IRNN(2, 4, K=3, eta=0.1, seed=0, dtype=torch.float64)
    b = dt.IRNN(2, 4, K=3, eta=0.1, seed=1, dtype=torch.float64)
    b.load_state_dict(a.state_dict())     # other weights (and seed) … the settings that matter must agree
    np.testing.assert_array_equal(b.U.detach().numpy(), a.U.detach().numpy())
    c = dt.IRNN(2, 4, K=5, eta=0.1, seed=0, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="dynlab_model") as info:
        c.load_state_dict(a.state_dict())
    assert '"K": 3' in str(info.value) and '"K": 5' in str(info.value)


def test_modules_made_directly_with_the_papers_options():
    """dynlab.torch.IRNN(…) is make_model's iRNN (same seed, same draws); seed=None follows torch's
    generator; the options are checked by dynlab (one line naming the option)."""
    eta = np.full((T, 2), 1e-2)
    cell = dt.IRNN(d, D, K=2, eta=eta, P="U", rank=2, g0="previous", activation="relu", seed=7, dtype=torch.float64)
    _same_model(dl.from_torch(cell), dl.make_model("irnn", D, d, K=2, eta=eta, P="U", rank=2, g0="previous",
                                                    activation="relu", seed=7))
    assert set(dict(cell.named_parameters())) == {"V", "H", "W", "b", "eta", "alpha"}
    assert not cell.alpha.requires_grad and cell.eta.requires_grad and cell.eta.shape == (T, 2)
    assert cell.W.dtype == torch.float64 and dt.RNN(d, D).U.dtype == torch.get_default_dtype()
    torch.manual_seed(0)
    a = dt.FastRNN(d, D)
    torch.manual_seed(0)
    b = dt.FastRNN(d, D)
    np.testing.assert_array_equal(a.U.detach().numpy(), b.U.detach().numpy())
    irnn = dt.RNN(d, D, identity_init=True, weight_scale=1.0, seed=0, dtype=torch.float64)
    np.testing.assert_array_equal(irnn.U.detach().numpy(), np.eye(D))
    assert irnn.activation == "relu" and not irnn.b.detach().numpy().any()
    with pytest.raises(ParameterError, match="^K: "):
        dt.IRNN(d, D, K=0)
    with pytest.raises(ParameterError, match="^method: .*scipy's adaptive solver"):
        dt.CTRNN(d, D, method="RK45")
    with pytest.raises(ParameterError, match="^dtype: "):
        dl.to_torch(dl.make_model("rnn", D, d), dtype="float16")
    with pytest.raises(ParameterError, match="^sigma_eps: .*nn.GRU"):
        dl.to_torch(dl.make_model("gru", D, d), sigma_eps=0.1)


def test_bad_inputs_name_the_argument():
    cell = dt.RNN(d, D, seed=0, dtype=torch.float64, batch_first=True)
    x = torch.zeros(B, T, d, dtype=torch.float64)
    for args, param in (((torch.zeros(B, T, d + 1, dtype=torch.float64),), "input"),
                        ((x, torch.zeros(B + 1, D, dtype=torch.float64)), "hx"),
                        ((torch.zeros(B, T, d, 1),), "input"), ((np.zeros((B, T, d)),), "input")):
        with pytest.raises(ParameterError) as info:
            cell(*args)
        assert info.value.param == param and "\n" not in str(info.value)
    per_time = dt.IRNN(d, D, K=2, eta=np.full((T, 2), 0.1), seed=0, batch_first=True)
    with pytest.raises(ParameterError, match=f"has {T + 1} steps but η has {T} rows"):
        per_time(torch.zeros(B, T + 1, d))


def test_random_initial_state_in_training_mode_only():
    """sigma_eps: h_0 = hx + σ ε with ε from torch's generator, in training mode; none in eval mode."""
    m = _model("rnn-identity-init")
    x, h0 = _data(m)
    module = dl.to_torch(m, batch_first=True, sigma_eps=0.5)
    torch.manual_seed(3)
    out, _ = module(torch.tensor(x), torch.tensor(h0))
    torch.manual_seed(3)
    eps = 0.5 * torch.randn(B, D, dtype=torch.float64).numpy()
    assert _rel(out.detach().numpy(), dl.simulate(m, x, h0 + eps).h.values) <= FWD_TOL
    assert _rel(out.detach().numpy(), dl.simulate(m, x, h0).h.values) > 1e-3      # the noise is there
    module.eval()
    out, _ = module(torch.tensor(x), torch.tensor(h0))
    assert _rel(out.detach().numpy(), dl.simulate(m, x, h0).h.values) <= FWD_TOL


def test_float32_module_follows_float32_rounding():
    """A float32 module against dl.simulate in float64: the difference is float32 rounding, ≤ 1e-5
    relative over T = 6 steps (float32's ε ≈ 6e-8 per operation), and far above float64's."""
    m = _model("irnn-K3-eq9-dense")
    x, h0 = _data(m)
    out, _ = dl.to_torch(m, batch_first=True, dtype=torch.float32)(torch.tensor(x, dtype=torch.float32),
                                                                   torch.tensor(h0, dtype=torch.float32))
    err = _rel(out.detach().numpy(), dl.simulate(m, x, h0).h.values)
    assert 1e-9 < err <= 1e-5


def test_state_dict_settings_are_json():
    module = dl.to_torch(_model("irnn-K5-previous-minus"))
    raw = module.state_dict()["dynlab_model"]
    assert raw.dtype == torch.uint8
    cfg = json.loads(bytes(raw.numpy()).decode())
    assert cfg["model"] == "irnn" and cfg["settings"]["g0"] == "previous" and cfg["settings"]["sign"] == -1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_forward_and_gradients_on_the_gpu():
    m = _model("irnn-K3-eq9-dense")
    x, h0 = _data(m)
    module = dl.to_torch(m, batch_first=True, device="cuda")
    out, _ = module(torch.tensor(x, device="cuda"), torch.tensor(h0, device="cuda"))
    assert _rel(out.cpu().detach().numpy(), dl.simulate(m, x, h0).h.values) <= 1e-11
