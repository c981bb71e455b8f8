"""MASO analysis (dynlab.analysis.partition) against the paper's theorems, finite differences,
the slow references of tests/naive_maso.py and a Monte-Carlo estimate.

Tolerances.  A piecewise-affine network is *exactly* affine on an input's region, so the
affine form, templates and 𝒜_h agree with the forward pass and the references to rounding:
states here are O(1) and sums run over ≤ T·D ≈ 100 terms, so 1e-12 absolute leaves a margin
of ~100× over double-precision accumulation.  Central differences of a function that is affine
on a neighbourhood of radius ≫ δ are exact up to rounding of the difference quotient,
≈ 1e-16·|f|/δ = 1e-10 for δ = 1e-6: we ask 1e-8 and check that the codes did not change
between x ± δ (so the function really was affine there).  Monte-Carlo comparisons are in units
of the estimator's own standard error.
"""
import numpy as np
import pytest

import naive_maso
import dynlab as dl
from dynlab.analysis import partition as P
from dynlab.analysis import partition_codes as PC
from dynlab.analysis import partition_h0 as PH
from dynlab.errors import ParameterError
from dynlab.models import Stack
from dynlab.models.stacked import StackedRNN

MAX_AFFINE = ("relu", "leaky-relu", "abs")
D, d, T = 4, 2, 9


def _model(act, layers, seed=1):
    if layers == 1:
        return dl.make_model("rnn", D, d, activation=act, seed=seed, weight_scale=0.9, leak=0.1)
    return Stack.random(D, d, cell="rnn", layers=layers, activation=act, seed=seed, weight_scale=0.9, leak=0.1)


def _h0(kind, layers, B, rng):
    if kind == "zero":
        return None
    if layers == 1:
        return rng.standard_normal((B, D))
    return [rng.standard_normal((B, D)) for _ in range(layers)]


def _layers(m):
    return m.layers if isinstance(m, Stack) else (m,)


# --------------------------------------------------------------------------- affine form
@pytest.mark.parametrize("act", MAX_AFFINE)
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("h0kind", ["zero", "random"])
def test_affine_form_reconstructs_h_and_z_exactly_and_matches_theorem1(act, layers, h0kind):
    rng = np.random.default_rng(7)
    m = _model(act, layers)
    B = 3
    x = rng.standard_normal((B, T, d))
    h0 = _h0(h0kind, layers, B, rng)
    af = P.affine_form(m, x, h0)
    assert af["A"].shape == (B, T * D, T * d)
    assert np.all(af["error"] < 1e-12)
    # h from the affine form equals dynlab.simulate of the first layer, and the naive stack
    h0_list = [np.zeros((B, D))] * layers if h0 is None else ([h0] if layers == 1 else h0)
    for b in range(B):
        A_ref, B_ref, h_ref = naive_maso.theorem1_matrix(_layers(m), x[b], [h[b] for h in h0_list])
        np.testing.assert_allclose(af["A"][b], A_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(af["B"][b], B_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(af["A"][b] @ x[b].ravel() + af["B"][b], h_ref, rtol=0, atol=1e-12)
    # z = W_out h_T + b_out from the affine form (Theorem 2 with 𝒲 = [W, 0, …, 0])
    Wo, bo = rng.standard_normal((3, D)), rng.standard_normal(3)
    z_aff = np.einsum("cd,bdj,bj->bc", Wo, af["A"][:, -D:], x.reshape(B, -1)) + af["B"][:, -D:] @ Wo.T + bo
    z_fwd = af["h"][:, -D:] @ Wo.T + bo
    np.testing.assert_allclose(z_aff, z_fwd, rtol=0, atol=1e-12)
    # the two evaluations of the reconstruction agree
    tr = P.forward(m, x, h0)
    for method in ("matrix", "recursion"):
        err, used = P.reconstruction_error(tr, method)
        assert used == method and np.all(err < 1e-12)


def test_first_layer_forward_is_dynlab_simulate_and_one_layer_stack_is_rnn():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, T, d))
    m1 = dl.make_model("rnn", D, d, activation="relu", seed=5)
    s1 = Stack.random(D, d, cell="rnn", layers=1, activation="relu", seed=5)
    np.testing.assert_array_equal(s1.layers[0].U, m1.U)
    tr = P.forward(Stack.random(D, d, cell="rnn", layers=2, activation="relu", seed=5), x)
    np.testing.assert_allclose(tr.H[0], dl.simulate(m1, x)["h"].values, rtol=0, atol=1e-13)
    layer2 = Stack.random(D, d, cell="rnn", layers=2, activation="relu", seed=5).layers[1]
    np.testing.assert_allclose(tr.H[1], dl.simulate(layer2, tr.H[0])["h"].values, rtol=0, atol=1e-13)


@pytest.mark.parametrize("name,kw", [("rin", {}), ("fastrnn", {"alpha": -1.0, "beta": 1.0}),
                                     ("antisymmetric", {"eps": 0.3, "gamma": 0.1})])
def test_affine_form_of_other_gated_cells_is_the_finite_difference_jacobian(name, kw):
    rng = np.random.default_rng(3)
    m = dl.make_model(name, D, d, activation="leaky-relu", seed=2, weight_scale=0.8, leak=0.2, **kw)
    x = rng.standard_normal((6, d))
    af = P.affine_form(m, x)
    assert af["error"] < 1e-12
    base = P.partition_codes(m, x)
    delta = 1e-6
    fd = np.empty_like(af["A"])
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = delta
        xp, xm = x + e.reshape(x.shape), x - e.reshape(x.shape)
        assert np.array_equal(P.partition_codes(m, xp), base) and np.array_equal(P.partition_codes(m, xm), base)
        fd[:, j] = (dl.simulate(m, xp)["h"].values.ravel() - dl.simulate(m, xm)["h"].values.ravel()) / (2 * delta)
    np.testing.assert_allclose(af["A"], fd, rtol=0, atol=1e-8)


# --------------------------------------------------------------------------- templates
@pytest.mark.parametrize("act", MAX_AFFINE)
@pytest.mark.parametrize("layers", [1, 2])
def test_templates_are_dz_dx_and_z_is_inner_product_plus_bias(act, layers):
    rng = np.random.default_rng(11)
    m = _model(act, layers, seed=4)
    x = rng.standard_normal((T, d))
    h0 = _h0("random", layers, 1, rng)
    h0 = None if h0 is None else (h0[0] if layers == 1 else [h[0] for h in h0])
    C = 3
    Wo, bo = rng.standard_normal((C, D)), rng.standard_normal(C)
    ds = P.templates(m, x, Wo, bo, h0)
    tmpl = ds["template"].values                       # (C, T, d)
    assert float(ds["z_error"].max()) < 1e-12           # z_c = ⟨template_c, x⟩ + bias_c exactly
    np.testing.assert_allclose(ds["inner_product"].values + ds["bias"].values, ds["z"].values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds["inner_product"].values, np.einsum("ctk,tk->c", tmpl, x), rtol=0, atol=1e-12)

    def z_of(xx):
        tr = P.forward(m, xx, h0)
        return tr.H[-1][0, -1] @ Wo.T + bo, tr.codes()

    z0, c0 = z_of(x)
    delta = 1e-6
    for t in range(T):
        for k in range(d):
            e = np.zeros_like(x)
            e[t, k] = delta
            zp, cp = z_of(x + e)
            zm, cm = z_of(x - e)
            assert np.array_equal(cp, c0) and np.array_equal(cm, c0)
            np.testing.assert_allclose(tmpl[:, t, k], (zp - zm) / (2 * delta), rtol=0, atol=1e-8)
    # and equals the read-out row of the materialised A_RNN (reverse mode = the matrix)
    af = P.affine_form(m, x, h0)
    np.testing.assert_allclose(tmpl.reshape(C, -1), Wo @ af["A"][-D:], rtol=0, atol=1e-12)


def test_templates_reverse_mode_on_a_long_sequence_matches_forward_z():
    rng = np.random.default_rng(2)
    m = dl.make_model("rnn", 16, 1, activation="relu", seed=0, identity_init=True, weight_scale=1.0)
    m = m.replace(W=np.abs(m.W) * 0.1, b=np.full(16, 0.01))
    x = rng.uniform(0, 1, (4, 500, 1))
    ds = P.templates(m, x, rng.standard_normal((5, 16)))
    assert ds["template"].shape == (4, 5, 500, 1)
    rel = ds["z_error"].values / np.maximum(1.0, np.abs(ds["z"].values))
    assert rel.max() < 1e-12


@pytest.mark.parametrize("layers", [1, 2])
def test_the_threaded_reverse_pass_equals_one_block(layers, monkeypatch):
    """Blocks of sequences on three threads (issue 20), and blocks cut small for memory on top,
    give the one-block templates, offsets and ∂z/∂h_0: each sequence's arithmetic is the same
    numba pass (bitwise but for BLAS's blocking of a product with fewer rows: 1e-14)."""
    from dynlab import config

    rng = np.random.default_rng(5)
    m = _model("relu", layers, seed=2)
    x = rng.standard_normal((7, T, d))
    tr = P.forward(m, x)
    Wo = rng.standard_normal((3, D))
    monkeypatch.setattr(config, "PARTITION_THREADS", 1)
    one = P._reverse_chunked(tr, Wo)
    monkeypatch.setattr(config, "PARTITION_THREADS", 3)
    monkeypatch.setattr(config, "PARTITION_MIN_WORK_PER_THREAD", 1)
    assert P._reverse_threads(7, 1) == 3 and len(P._chunks(7, 1, 3)) == 3
    for entries in (P.REVERSE_CHUNK_ENTRIES, 3 * T * D):     # and one sequence per memory block
        monkeypatch.setattr(P, "REVERSE_CHUNK_ENTRIES", entries)
        split = P._reverse_chunked(tr, Wo)
        for key in ("dx", "offset"):
            np.testing.assert_allclose(split[key], one[key], rtol=1e-14, atol=1e-14 * np.abs(one[key]).max())
        for a, b in zip(split["dh0"], one["dh0"]):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14 * np.abs(b).max())


# --------------------------------------------------------------------------- random initial state
def test_A_h_is_the_product_of_A_sigma_W_r_and_the_h0_jacobian():
    rng = np.random.default_rng(5)
    m = dl.make_model("rnn", D, d, activation="abs", seed=3, weight_scale=0.9)
    x = rng.standard_normal((T, d))
    h0 = rng.standard_normal(D)
    Ah = PH.initial_state_jacobian(m, x, h0)
    np.testing.assert_allclose(Ah, naive_maso.product_A_h(m, x, h0), rtol=0, atol=1e-12)
    delta = 1e-6
    for j in range(D):
        e = np.zeros(D)
        e[j] = delta
        fd = (dl.simulate(m, x, h0 + e)["h"].values[-1] - dl.simulate(m, x, h0 - e)["h"].values[-1]) / (2 * delta)
        np.testing.assert_allclose(Ah[:, j], fd, rtol=0, atol=1e-8)


def test_A_h_of_a_stack_is_the_jacobian_wrt_every_layer_initial_state():
    rng = np.random.default_rng(6)
    m = _model("leaky-relu", 2, seed=8)
    x = rng.standard_normal((T, d))
    h0 = [rng.standard_normal(D), rng.standard_normal(D)]
    Ah = PH.initial_state_jacobian(m, x, h0)
    assert Ah.shape == (D, 2 * D)
    delta = 1e-6
    for ell in range(2):
        for j in range(D):
            hp = [h.copy() for h in h0]
            hm = [h.copy() for h in h0]
            hp[ell][j] += delta
            hm[ell][j] -= delta
            fd = (P.forward(m, x, hp).H[-1][0, -1] - P.forward(m, x, hm).H[-1][0, -1]) / (2 * delta)
            np.testing.assert_allclose(Ah[:, ell * D + j], fd, rtol=0, atol=1e-8)


def test_a_stack_takes_its_whole_state_as_simulate_does():
    """h0 of a stack as ``dl.simulate`` takes it, (B, L·D) or (L·D,) with the layers bottom first,
    gives the partition of the per-layer list (bitwise: the same arrays split), and its states are
    simulate's (the tests/battery.py pass one h0 to every analysis; this was refused before)."""
    rng = np.random.default_rng(10)
    m = dl.make_model("stack", D, d, cell="rnn", layers=2, activation="relu", seed=3, weight_scale=0.8)
    x = rng.standard_normal((2, T, d))
    h0 = rng.standard_normal((2, 2 * D))
    ds = P.partition(m, x, h0, backend="numpy")
    per_layer = P.partition(m, x, [h0[:, :D], h0[:, D:]], backend="numpy")
    np.testing.assert_array_equal(ds.codes.values, per_layer.codes.values)
    np.testing.assert_array_equal(ds.h.values, per_layer.h.values)
    H = dl.simulate(m, x, h0, backend="numpy").h.values
    np.testing.assert_allclose(np.concatenate([ds.h.values[..., 0], ds.h.values[..., 1]], axis=-1), H, rtol=0,
                               atol=1e-14)
    one = P.partition(m, x[0], h0[0], backend="numpy")
    np.testing.assert_array_equal(one.codes.values, ds.codes.values[0])


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_dL_dh0_is_dL_dz_W_out_A_h(loss):
    rng = np.random.default_rng(9)
    N, C = 5, 3
    m = dl.make_model("rnn", D, d, activation="relu", seed=2, weight_scale=1.1)
    x = rng.standard_normal((N, T, d))
    h0 = 0.3 * rng.standard_normal((N, D))
    Wo, bo = rng.standard_normal((C, D)), rng.standard_normal(C)
    y = rng.standard_normal((N, C)) if loss == "mse" else rng.integers(0, C, N)
    g = PH.loss_gradient_h0(m, x, y, Wo, bo, loss=loss, h0=h0)
    Ah = PH.initial_state_jacobian(m, x, h0)                                # (N, D, D)
    np.testing.assert_allclose(g["dL_dh0"], np.einsum("nc,cd,ndj->nj", g["dL_dz"], Wo, Ah), rtol=0, atol=1e-12)

    def mean_loss(hh):
        z = dl.simulate(m, x, hh)["h"].values[:, -1] @ Wo.T + bo
        return float(np.mean(PH.losses(z, np.asarray(y), loss)))

    assert abs(mean_loss(h0) - g["loss"]) < 1e-14
    delta = 1e-6
    fd = np.empty((N, D))
    for n in range(N):
        for j in range(D):
            e = np.zeros((N, D))
            e[n, j] = delta
            fd[n, j] = (mean_loss(h0 + e) - mean_loss(h0 - e)) / (2 * delta)
    # CE is smooth in z: central-difference truncation O(δ²·|f'''|) ≪ 1e-8 as well
    np.testing.assert_allclose(g["dL_dh0"], fd, rtol=0, atol=1e-8)


@pytest.fixture(scope="module")
def reg_setting():
    rng = np.random.default_rng(0)
    N, C = 8, D
    m = dl.make_model("rnn", D, d, activation="relu", seed=2, weight_scale=1.2)
    x = rng.standard_normal((N, T, d))
    Wo, bo = rng.standard_normal((C, D)), rng.standard_normal(C)
    return m, x, Wo, bo, rng.standard_normal((N, C)), rng.integers(0, C, N)


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_corrected_regulariser_matches_monte_carlo_and_printed_form_does_not(reg_setting, loss):
    m, x, Wo, bo, ymse, yce = reg_setting
    y = ymse if loss == "mse" else yce
    sigma = 1e-4  # the partition never changes (checked below): the expansion is exact for MSE
    mc = PH.random_h0_monte_carlo(m, x, y, Wo, bo, sigma=sigma, loss=loss, pairs=3000, seed=1)
    assert mc["changed_fraction"] == 0.0
    good = PH.random_h0_regulariser(m, x, y, Wo, bo, sigma=sigma, loss=loss)
    printed = PH.random_h0_regulariser(m, x, y, Wo, bo, sigma=sigma, loss=loss, printed=True)
    assert abs(good["value"] - mc["estimate"]) < 3 * mc["stderr"]
    assert abs(printed["value"] - mc["estimate"]) > 10 * mc["stderr"]
    assert good["loss"] == pytest.approx(mc["loss"], abs=1e-15)


def test_printed_cross_entropy_is_wrong_even_without_an_output_layer(reg_setting):
    m, x, _, _, _, yce = reg_setting
    Wo = np.eye(D)  # z = h_T: the paper's setting, where 𝒜_h is dz/dh_0
    mc = PH.random_h0_monte_carlo(m, x, yce, Wo, sigma=1e-4, loss="ce", pairs=3000, seed=2)
    good = PH.random_h0_regulariser(m, x, yce, Wo, sigma=1e-4, loss="ce")
    printed = PH.random_h0_regulariser(m, x, yce, Wo, sigma=1e-4, loss="ce", printed=True)
    assert abs(good["value"] - mc["estimate"]) < 3 * mc["stderr"]
    assert abs(printed["value"] - mc["estimate"]) > 10 * mc["stderr"]
    # with W_out = I the printed MSE form is the corrected one
    mse_good = PH.random_h0_regulariser(m, x, np.zeros((len(x), D)), Wo, sigma=0.1)
    mse_printed = PH.random_h0_regulariser(m, x, np.zeros((len(x), D)), Wo, sigma=0.1, printed=True)
    assert mse_printed["value"] == pytest.approx(mse_good["value"], rel=1e-13)


def test_regulariser_bad_inputs_name_the_parameter(reg_setting):
    m, x, Wo, bo, ymse, yce = reg_setting
    with pytest.raises(ParameterError) as e:
        PH.random_h0_regulariser(m, x, yce % 3, np.ones((3, D)), sigma=0.1, loss="ce", printed=True)
    assert e.value.param == "W_out"
    with pytest.raises(ParameterError) as e:
        PH.random_h0_regulariser(m, x, ymse, Wo, sigma=0.1, loss="hinge")
    assert e.value.param == "loss"
    with pytest.raises(ParameterError) as e:
        PH.random_h0_regulariser(m, x, ymse, Wo, sigma=-1.0)
    assert e.value.param == "sigma"
    with pytest.raises(ParameterError) as e:
        PH.random_h0_regulariser(m, x, ymse.astype(int), Wo, sigma=0.1, loss="ce")
    assert e.value.param == "y"


# --------------------------------------------------------------------------- codes
def test_codes_refused_for_smooth_activations_and_other_models():
    x = np.zeros((5, d))
    with pytest.raises(ParameterError) as e:
        P.partition_codes(dl.make_model("rnn", D, d, activation="tanh", seed=0), x)
    assert e.value.param == "activation" and "max-affine" in e.value.message
    with pytest.raises(ParameterError) as e:
        P.partition(Stack((dl.make_model("rnn", D, d, activation="relu", seed=0),
                                dl.make_model("rnn", D, D, activation="sigmoid", seed=1))), x)
    assert e.value.param == "activation" and "layer 2" in e.value.message
    with pytest.raises(ParameterError) as e:
        P.partition_codes(dl.make_model("irnn", D, d, activation="relu", seed=0), x)
    assert e.value.param == "model"


@pytest.mark.parametrize("act", MAX_AFFINE)
def test_codes_are_the_piece_index_of_the_naive_preactivations(act):
    rng = np.random.default_rng(1)
    m = _model(act, 2, seed=3)
    x = rng.standard_normal((T, d))
    codes = P.partition_codes(m, x)
    assert codes.shape == (T, D, 2) and codes.dtype == np.int8
    fw = naive_maso.stack_forward(m.layers, x, [np.zeros(D)] * 2)
    for ell in range(2):
        Z = np.array(fw[ell][2])
        np.testing.assert_array_equal(codes[..., ell], (Z >= 0).astype(np.int8))


def test_regions_non_decreasing_and_identical_inputs_give_identical_codes():
    rng = np.random.default_rng(4)
    m = dl.make_model("rnn", 6, 1, activation="relu", seed=1, weight_scale=1.0)
    base = rng.standard_normal((5, 40, 1))
    x = np.concatenate([base, base[:2]])            # sequences 5, 6 repeat 0, 1
    x[3, 20:] += 0.5                                  # a late change only
    ds = P.partition(m, x)
    codes = ds["codes"].values
    np.testing.assert_array_equal(codes[5], codes[0])
    np.testing.assert_array_equal(codes[6], codes[1])
    reg, pre = ds["regions"].values, ds["prefix_regions"].values
    assert np.all(np.diff(reg) >= 0) and np.all(np.diff(pre) >= 0)
    assert pre[-1] <= 5 and pre[-1] >= 2
    # the references: sets of codes and of prefixes
    for t in range(40):
        assert reg[t] == len({codes[b, s].tobytes() for b in range(7) for s in range(t + 1)})
        assert pre[t] == len({codes[b, :t + 1].tobytes() for b in range(7)})
    Hd = P.hamming_distances(codes)
    assert Hd[0, 5] == 0 and Hd[1, 6] == 0 and np.all(np.diag(Hd) == 0)
    np.testing.assert_array_equal(Hd, naive_maso.hamming(codes, codes))
    assert np.all(ds["reconstruction_error"].values < 1e-12)


def test_hamming_distances_with_more_than_two_pieces():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, (6, 4, 5)), rng.integers(0, 3, (4, 4, 5))
    np.testing.assert_array_equal(P.hamming_distances(a, b), naive_maso.hamming(a, b))


# --------------------------------------------------------------------------- geometry
def test_knn_matches_brute_force_with_ties():
    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, (60, 12)).astype(float)    # binary codes: many distance ties
    y = rng.integers(0, 4, 60)
    for k in (1, 2, 5, 10):
        np.testing.assert_array_equal(PC.knn_predict(X[:45], y[:45], X[45:], k),
                                      naive_maso.knn_predict(X[:45], y[:45].tolist(), X[45:], k))
    acc = PC.knn_accuracy(X, y, (1, 3), seed=0)
    assert set(acc) == {1, 3} and all(0 <= v <= 1 for v in acc.values())


def test_knn_matches_scikit_learn_on_continuous_features():
    neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 6))
    y = (X[:, 0] + 0.5 * rng.standard_normal(200) > 0).astype(int)
    for k in (1, 5, 9):  # two classes, odd k, no distance ties: the tie rules never act
        ref = neighbors.KNeighborsClassifier(k).fit(X[:150], y[:150]).predict(X[150:])
        np.testing.assert_array_equal(PC.knn_predict(X[:150], y[:150], X[150:], k), ref)


def test_embedding_pca_is_the_projection_of_prefix_codes():
    from dynlab.analysis.projection import pca, project

    rng = np.random.default_rng(2)
    codes = rng.integers(0, 2, (30, 8, 5))
    emb = PC.embed_codes(codes, [2, 8])
    assert emb.shape == (2, 30, 2)
    f = codes[:, :8].reshape(30, -1).astype(float)
    mean, comps, _ = pca(f, 2)
    np.testing.assert_allclose(emb[1], project(f, mean, comps), atol=1e-12)
    # distances in the PCA plane never exceed the code distances (an orthogonal projection)
    dist_codes = np.sqrt(P.hamming_distances(codes[:, :8]))
    dist_emb = np.linalg.norm(emb[1][:, None] - emb[1][None], axis=-1)
    assert np.all(dist_emb <= dist_codes + 1e-9)
    # the large-cloud path (leading eigenvectors of the Gram / scatter matrix) is the same
    # projection; eigenvectors of the squared matrix carry ≈ ε·λ₁/gap error, hence 1e-8
    for shape in ((30, 8 * 5), (300, 20)):
        g = rng.integers(0, 2, shape).astype(float)
        mean, comps, _ = pca(g, 2)
        np.testing.assert_allclose(PC._pca2_eigh(g), project(g, mean, comps), atol=1e-8)
    with pytest.raises(ParameterError) as e:
        PC.embed_codes(codes, [9])
    assert e.value.param == "times"


# --------------------------------------------------------------------------- Dataset, model
def test_partition_dataset_contract_and_round_trip(tmp_path):
    from dynlab.io import model_from_dataset, read_dataset, write_dataset

    rng = np.random.default_rng(0)
    m = _model("relu", 2, seed=2)
    ds = P.partition(m, rng.standard_normal((3, T, d)))
    assert ds["codes"].dims == ("batch", "time", "unit", "layer")
    assert ds["regions"].dims == ("time",) and ds["reconstruction_error"].dims == ("batch",)
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
    for key in ("model", "backend", "dynlab_version", "command", "layers", "activation", "layer1_seed",
                "layer2_seed"):
        assert key in ds.attrs
    # every layer alike, under layer{ℓ}_ (layer 1 included)
    assert {"layer1_U", "layer1_W", "layer2_U", "layer2_W"} <= set(ds.data_vars) and "U" not in ds
    write_dataset(ds, tmp_path / "p.nc")
    back = read_dataset(tmp_path / "p.nc")
    np.testing.assert_array_equal(back["codes"].values, ds["codes"].values)
    layer2 = model_from_dataset(back, prefix="layer2_")
    np.testing.assert_array_equal(layer2.W, m.layers[1].W)
    np.testing.assert_array_equal(model_from_dataset(back, prefix="layer1_").U, m.layers[0].U)
    rebuilt = dl.io.model_from_partition(back)
    np.testing.assert_array_equal(P.partition(rebuilt, ds["x"].values)["codes"].values, ds["codes"].values)


def test_stacked_rnn_validation():
    a = dl.make_model("rnn", 4, 2, seed=0)
    with pytest.raises(ParameterError) as e:
        Stack((a, dl.make_model("rnn", 4, 2, seed=1)))
    assert e.value.param == "layers"
    with pytest.raises(ParameterError):
        Stack(())
    with pytest.raises(ParameterError) as e:
        Stack.random(4, 2, cell="rnn", layers=0)
    assert e.value.param == "layers"
    with pytest.raises(ParameterError) as e:
        P.forward(Stack.random(4, 2, cell="rnn", layers=2, activation="relu"), np.zeros((3, 2)), h0=np.zeros(4))
    assert e.value.param == "h0"


def test_single_sequence_regions_templates_shapes_and_bad_arguments():
    rng = np.random.default_rng(8)
    m = dl.make_model("rin", D, d, activation="relu", seed=1)
    x = rng.standard_normal((T, d))
    ds = P.partition(m, x)
    assert ds["codes"].dims == ("time", "unit") and ds["reconstruction_error"].dims == ()
    assert float(ds["reconstruction_error"]) < 1e-12
    codes = ds["codes"].values
    np.testing.assert_array_equal(ds["regions"].values,
                                  [len({codes[s].tobytes() for s in range(t + 1)}) for t in range(T)])
    assert np.all(ds["prefix_regions"].values == 1)
    tp = P.templates(m, x, np.ones((2, D)))
    assert tp["template"].dims == ("class", "time", "unit_in") and float(tp["z_error"].max()) < 1e-12
    with pytest.raises(ParameterError) as e:
        P.templates(m, x, np.ones((2, D + 1)))
    assert e.value.param == "W_out"
    with pytest.raises(ParameterError) as e:
        P.partition(m, x, reconstruction="svd")
    assert e.value.param == "reconstruction"


def test_divergence_is_reported_with_its_step():
    m = dl.make_model("rnn", D, d, activation="abs", seed=0, weight_scale=60.0)
    with pytest.raises(dl.DivergenceError) as e:
        P.partition(m, np.ones((400, d)))
    assert 1 < e.value.step <= 400


def test_tsne_of_identical_codes_is_one_point():
    pytest.importorskip("sklearn.manifold")
    emb = PC.embed_codes(np.ones((6, 4, 3), dtype=np.int8), [2, 4], method="tsne")
    assert np.all(emb == 0.0)


def test_stacked_rnn_is_a_deprecated_stack_of_rnn_layers():
    """One stack type: the old ``StackedRNN`` name still builds the same model — a ``Stack`` of rnn
    layers with layer ℓ seeded seed + ℓ − 1 — and warns; its partition equals the Stack's."""
    with pytest.warns(DeprecationWarning, match="dl.Stack|dynlab.Stack"):
        old = StackedRNN.random(4, 2, layers=2, activation="relu", seed=3)
    new = Stack.random(4, 2, cell="rnn", layers=2, activation="relu", seed=3)
    assert isinstance(old, Stack)
    for a, b in zip(old.layers, new.layers):
        np.testing.assert_array_equal(a.U, b.U)
        np.testing.assert_array_equal(a.W, b.W)
    x = np.random.default_rng(0).standard_normal((2, 6, 2))
    np.testing.assert_array_equal(P.partition_codes(old, x), P.partition_codes(new, x))
    with pytest.warns(DeprecationWarning):
        StackedRNN(new.layers)
