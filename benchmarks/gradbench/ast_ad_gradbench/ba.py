"""GradBench's ``ba`` eval: bundle adjustment's reprojection error, and its sparse Jacobian.

The objective is ADBench's, written over all observations at once: row ``j`` of each array is
observation ``j`` (its camera's 11 parameters, its point, its weight, its feature). Observation
``j``'s two residuals depend on its own 15 inputs only, so the Jacobian is block-sparse, and no
two observations' residuals share an input: the cotangent that weighs residual ``c`` of every
observation by one gives row ``c`` of every block (row compression), so two backward passes after
one forward pass give every block (``blocks``). Column compression, 15 tangents each moving input
``k`` of every observation through one batched forward pass, gives the same blocks
(``blocks_by_columns``, which ``examples/benchmark.py batched`` times beside it). The blocks are
then laid out in the eval's compressed-row format.
"""

import numpy as np

import ast_ad

from .wrap import timed

CAMERA = 11  # rotation (3), centre (3), focal length, principal point (2), radial distortion (2)


def rodrigues_rotate_point(rot, X):
    """Each point ``X[j]`` rotated by the axis-angle vector ``rot[j]``."""
    sqtheta = np.sum(rot * rot, axis=1)
    turning = sqtheta != 0.0
    theta = np.sqrt(np.where(turning, sqtheta, 1.0))
    costheta = np.cos(theta)[:, None]
    sintheta = np.sin(theta)[:, None]
    w = rot / theta[:, None]
    w_cross_X = np.cross(w, X)
    tmp = np.sum(w * X, axis=1)[:, None] * (1.0 - costheta)
    rotated = X * costheta + w_cross_X * sintheta + w * tmp
    return np.where(turning[:, None], rotated, X + np.cross(rot, X))


def project(cams, X):
    Xcam = rodrigues_rotate_point(cams[:, 0:3], X - cams[:, 3:6])
    proj = Xcam[:, 0:2] / Xcam[:, 2:3]
    rsq = np.sum(proj * proj, axis=1)[:, None]
    distortion = 1.0 + cams[:, 9:10] * rsq + cams[:, 10:11] * rsq * rsq
    return proj * distortion * cams[:, 6:7] + cams[:, 7:9]


def reproj_err(cams, X, w, feats):
    """The weighted reprojection error of each observation: one row of two per observation."""
    return w[:, None] * (project(cams, X) - feats)


def w_err(w):
    return 1.0 - w * w


class Problem:
    """The eval's input, duplicated as it asks: n cameras, m points, p observations of them in
    turn."""

    def __init__(self, raw):
        self.n, self.m, self.p = int(raw["n"]), int(raw["m"]), int(raw["p"])
        self.cams = np.tile(np.asarray(raw["cam"], dtype=float), (self.n, 1))
        self.X = np.tile(np.asarray(raw["x"], dtype=float), (self.m, 1))
        self.w = np.full(self.p, float(raw["w"]))
        self.feats = np.tile(np.asarray(raw["feat"], dtype=float), (self.p, 1))
        observation = np.arange(self.p)
        self.camera_of, self.point_of = observation % self.n, observation % self.m

    def inputs(self):
        """Each observation's camera, point, weight and feature, one row each."""
        return self.cams[self.camera_of], self.X[self.point_of], self.w, self.feats


def objective(problem):
    cams, X, w, feats = problem.inputs()
    return reproj_err(cams, X, w, feats), w_err(w)


def blocks(problem, out=None):
    """Every observation's 2 x 15 block of the Jacobian of its residuals (camera, point, weight),
    and the derivative of each weight error: one forward pass (``ast_ad.vjp``) and two backward
    passes, each weighing one of the two residuals of every observation (row compression: the
    adjoints of observation ``j``'s inputs are row ``c`` of its block). ``out``: a ``(p, 2, 15)``
    array to write the blocks into (``jacobian``: the eval's values, in place)."""
    cams, X, w, feats = problem.inputs()
    errors, backward = ast_ad.vjp(reproj_err, cams, X, w, feats)
    J = np.empty((len(w), 2, CAMERA + 4)) if out is None else out
    for c in range(2):
        weighed = np.zeros_like(errors)
        weighed[:, c] = 1.0
        cams_bar, X_bar, w_bar, _ = backward(weighed)
        J[:, c, :CAMERA] = cams_bar
        J[:, c, CAMERA:CAMERA + 3] = X_bar
        J[:, c, CAMERA + 3] = w_bar
    _, w_slope = ast_ad.jvp(w_err, (w,), (np.ones_like(w),))
    return J, w_slope  # (p, 2, 15), (p,)


def blocks_by_columns(problem):
    """``blocks`` by columns: the 15 columns of a block are 15 directions, each moving one
    parameter of every observation at once (column compression), carried through one batched
    forward pass (``jvp(..., batched=True)``: the objective is computed once for all)."""
    cams, X, w, feats = problem.inputs()
    primals = (cams, X, w, feats)
    columns = CAMERA + 3 + 1
    moved_cams = np.zeros((columns, *cams.shape))
    moved_X = np.zeros((columns, *X.shape))
    moved_w = np.zeros((columns, *w.shape))
    for k in range(CAMERA):
        moved_cams[k, :, k] = 1.0
    for k in range(3):
        moved_X[CAMERA + k, :, k] = 1.0
    moved_w[CAMERA + 3] = 1.0
    _, dots = ast_ad.jvp(reproj_err, primals, (moved_cams, moved_X, moved_w, None), batched=True)
    _, w_slope = ast_ad.jvp(w_err, (w,), (np.ones_like(w),))
    return np.moveaxis(dots, 0, -1), w_slope  # (p, 2, 15), (p,)


def sparse(problem, J, w_slope):
    """The Jacobian in compressed rows: two rows of 15 entries per observation, then one per
    weight."""
    n, m, p = problem.n, problem.m, problem.p
    rows = np.concatenate(
        [[0], (CAMERA + 4) * np.arange(1, 2 * p + 1), 2 * p * (CAMERA + 4) + np.arange(1, p + 1)]
    )
    camera_cols = CAMERA * problem.camera_of[:, None] + np.arange(CAMERA)
    point_cols = CAMERA * n + 3 * problem.point_of[:, None] + np.arange(3)
    weight_cols = (CAMERA * n + 3 * m + np.arange(p))[:, None]
    # (p, 15), the same for both rows
    per_row = np.concatenate([camera_cols, point_cols, weight_cols], axis=1)
    cols = np.concatenate(
        [np.repeat(per_row[:, None, :], 2, axis=1).ravel(), CAMERA * n + 3 * m + np.arange(p)]
    )
    vals = np.concatenate([J.ravel(), w_slope])
    return rows, cols, vals


def jacobian(problem):
    """``sparse(problem, *blocks(problem))`` with the blocks and the weights' derivatives written
    into the eval's array of values where they belong, and its columns built in place: at the
    eval's sizes (up to 30 million entries) each copy of them cost more than a pass of the
    objective."""
    n, m, p = problem.n, problem.m, problem.p
    block = 2 * (CAMERA + 4)
    vals = np.empty(block * p + p)
    _, vals[block * p:] = blocks(problem, out=vals[:block * p].reshape(p, 2, CAMERA + 4))
    rows = np.empty(2 * p + p + 1, dtype=np.int64)
    rows[0] = 0
    rows[1:2 * p + 1] = (CAMERA + 4) * np.arange(1, 2 * p + 1)
    rows[2 * p + 1:] = block * p + np.arange(1, p + 1)
    cols = np.empty(block * p + p, dtype=np.int64)
    per_row = cols[:block * p].reshape(p, 2, CAMERA + 4)
    per_row[:, :, :CAMERA] = (CAMERA * problem.camera_of[:, None] + np.arange(CAMERA))[:, None, :]
    per_row[:, :, CAMERA:CAMERA + 3] = \
        (CAMERA * n + 3 * problem.point_of[:, None] + np.arange(3))[:, None, :]
    per_row[:, :, CAMERA + 3] = (CAMERA * n + 3 * m + np.arange(p))[:, None]
    cols[block * p:] = CAMERA * n + 3 * m + np.arange(p)
    return rows, cols, vals


def _objective_output(errors):
    reproj, weights = errors
    return {"reproj_error": {"elements": reproj.ravel()[:2].tolist(), "repeated": len(reproj)},
            "w_err": {"element": float(weights[0]), "repeated": len(weights)}}


def _jacobian_output(matrix):
    def first_and_last(values):
        return np.concatenate([values[:30], values[-1:]]).tolist()
    rows, cols, vals = matrix
    return {
        "rows": [int(v) for v in first_and_last(rows)],
        "cols": [int(v) for v in first_and_last(cols)],
        "vals": [float(v) for v in first_and_last(vals)],
    }


FUNCTIONS = {
    "objective": timed(pre=Problem, post=_objective_output)(objective),
    "jacobian": timed(pre=Problem, post=_jacobian_output)(jacobian),
}
