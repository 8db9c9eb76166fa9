"""GradBench's ``ht`` eval: ADBench's hand tracking, a skinned hand model fitted to points, and its
Jacobian.

The objective follows ADBench's: pose parameters from the 26 angles, each bone's rotation from its
Euler angles, the bones' absolute transforms down the skeleton, the skinned vertices, the global
rotation, scale and translation, and the distance of each point to its vertex (or, in the
complicated variant, to a point of its triangle given by two barycentric coordinates ``us``). The
bones are handled together as stacks of matrices. The Jacobian in the angles is ``ast_ad.jacfwd``
(one batched pass); in the complicated variant each point's error depends on its own two
coordinates only, so one more batched pass of two directions, moving every point's first (second)
coordinate at once, gives the two columns the eval asks for.
"""

import numpy as np

import ast_ad

from .wrap import timed


def to_pose_params(theta, nbones):
    """The (bones + 3) x 3 pose parameters: global rotation, scale, translation, then each finger's
    bones."""
    pose = np.zeros((nbones + 3, 3))
    pose[0, :] = theta[0:3]
    pose[1, :] = 1.0
    pose[2, :] = theta[3:6]
    i_theta = 6
    i_pose = 5
    for _ in range(5):  # the fingers
        for i in range(3):
            pose[i_pose, 0] = theta[i_theta]
            i_theta += 1
            if i == 0:
                pose[i_pose, 1] = theta[i_theta]
                i_theta += 1
            i_pose += 1
        i_pose += 1
    return pose


def euler_angles_to_rotation_matrix(xzy):
    """One rotation per row of angles (x, z, y): a stack of 3 x 3 matrices."""
    tx, ty, tz = xzy[:, 0], xzy[:, 2], xzy[:, 1]
    zero, one = np.zeros_like(tx), np.ones_like(tx)
    Rx = np.stack(
        [one, zero, zero, zero, np.cos(tx), -np.sin(tx), zero, np.sin(tx), np.cos(tx)], axis=1
    )
    Ry = np.stack(
        [np.cos(ty), zero, -np.sin(ty), zero, one, zero, np.sin(ty), zero, np.cos(ty)], axis=1
    )
    Rz = np.stack(
        [np.cos(tz), -np.sin(tz), zero, np.sin(tz), np.cos(tz), zero, zero, zero, one], axis=1
    )
    return np.reshape(Rz, (-1, 3, 3)) @ np.reshape(Ry, (-1, 3, 3)) @ np.reshape(Rx, (-1, 3, 3))


def get_posed_relatives(pose, base_relatives):
    """Each bone's transform relative to its parent: its base transform, then its own rotation."""
    R = euler_angles_to_rotation_matrix(pose[3:])
    bones = R.shape[0]
    top = np.concatenate([R, np.zeros((bones, 3, 1))], axis=2)
    bottom = np.broadcast_to(np.array([0.0, 0.0, 0.0, 1.0]), (bones, 1, 4))
    return base_relatives @ np.concatenate([top, bottom], axis=1)


def relatives_to_absolutes(relatives, parents):
    absolutes = []
    for i in range(len(parents)):
        if parents[i] == -1:
            absolutes.append(relatives[i])
        else:
            absolutes.append(absolutes[parents[i]] @ relatives[i])
    return np.stack(absolutes)


def angle_axis_to_rotation_matrix(angle_axis):
    n = np.sqrt(np.sum(angle_axis * angle_axis))
    if n < 0.0001:
        return np.eye(3)
    x, y, z = angle_axis[0] / n, angle_axis[1] / n, angle_axis[2] / n
    s, c = np.sin(n), np.cos(n)
    return np.reshape(np.stack([
        x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s,
        x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s,
        x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c]), (3, 3))


def vertex_positions(theta, model):
    """The hand's vertices, one row each, posed by ``theta``."""
    pose = to_pose_params(theta, model["bones"])
    absolutes = relatives_to_absolutes(
        get_posed_relatives(pose, model["base_relatives"]), model["parents"]
    )
    transforms = absolutes @ model["inverse_base_absolutes"]
    positions = transforms[:, :3, :] @ model["base_positions"].T  # bone, coordinate, vertex
    skinned = np.einsum("bkv,vb->vk", positions, model["weights"])
    if model["is_mirrored"]:
        skinned = skinned * np.array([-1.0, 1.0, 1.0])
    R = angle_axis_to_rotation_matrix(pose[0]) * pose[1]
    return (R @ skinned.T).T + pose[2]


def simple_objective(theta, model, points, correspondences):
    return points - vertex_positions(theta, model)[correspondences]


def complicated_objective(theta, us, model, points, corners):
    """The distance of each point to the point of its triangle (corners: the triangle's vertices) at
    ``us``."""
    vertices = vertex_positions(theta, model)
    u, v = us[:, 0:1], us[:, 1:2]
    on_hand = (
        u * vertices[corners[:, 0]]
        + v * vertices[corners[:, 1]]
        + (1.0 - u - v) * vertices[corners[:, 2]]
    )
    return points - on_hand


class Problem:
    def __init__(self, raw):
        model, data = raw["data"]["model"], raw["data"]
        self.theta = np.asarray(raw["theta"], dtype=float)
        self.us = np.asarray(raw["us"], dtype=float).reshape(-1, 2)
        self.model = {
            "bones": int(model["bone_count"]),
            "parents": np.asarray(model["parents"], dtype=int),
            "base_relatives": np.asarray(model["base_relatives"], dtype=float),
            "inverse_base_absolutes": np.asarray(model["inverse_base_absolutes"], dtype=float),
            "base_positions": np.asarray(model["base_positions"], dtype=float),
            "weights": np.asarray(model["weights"], dtype=float),
            "is_mirrored": bool(model["is_mirrored"]),
        }
        self.points = np.asarray(data["points"], dtype=float)
        self.correspondences = np.asarray(data["correspondences"], dtype=int)
        # then each point corresponds to a triangle, else to a vertex
        self.complicated = len(self.us) > 0
        self.corners = (
            np.asarray(model["triangles"], dtype=int)[self.correspondences]
            if self.complicated
            else None
        )


def objective(problem):
    if problem.complicated:
        return complicated_objective(
            problem.theta, problem.us, problem.model, problem.points, problem.corners
        )
    return simple_objective(problem.theta, problem.model, problem.points, problem.correspondences)


_theta_jacobians = {
    False: ast_ad.jacfwd(simple_objective),
    True: ast_ad.jacfwd(complicated_objective),
}


def jacobian(problem):
    """3 rows per point; in the complicated variant two columns for its own ``us``, then one per
    angle."""
    if not problem.complicated:
        J = _theta_jacobians[False](
            problem.theta, problem.model, problem.points, problem.correspondences
        )
        return np.reshape(J, (-1, len(problem.theta)))
    given = (problem.theta, problem.us, problem.model, problem.points, problem.corners)
    J = _theta_jacobians[True](*given)
    # every point's k-th coordinate moved at once (its own error's column), both in one pass
    moved = np.zeros((2, *problem.us.shape))
    moved[0, :, 0] = moved[1, :, 1] = 1.0
    columns = ast_ad.jvp(complicated_objective, given, (None, moved, None, None, None),
                         batched=True)[1]
    return np.concatenate([np.reshape(columns, (2, -1)).T, np.reshape(J, (-1, len(problem.theta)))],
                          axis=1)


def random_input(rng, points, complicated):
    """A small random hand in the eval's input format (ADBench's 22 bones and their parents, 12
    vertices) with ``points`` points, drawn from ``rng``: for the tests and the benchmark, which
    have no GradBench checkout."""
    bones, vertices = 22, 12
    parents = [-1, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11, 0, 13, 14, 15, 0, 17, 18, 19, 0]

    def transforms():
        t = np.tile(np.eye(4), (bones, 1, 1))
        t[:, :3, :] += rng.normal(size=(bones, 3, 4)) * 0.3
        return t.tolist()
    weights = rng.random((vertices, bones))
    model = {
        "bone_count": bones,
        "bone_names": [f"b{i}" for i in range(bones)],
        "parents": parents,
        "base_relatives": transforms(),
        "inverse_base_absolutes": transforms(),
        "base_positions": np.hstack(
            [rng.normal(size=(vertices, 3)), np.ones((vertices, 1))]
        ).tolist(),
        "weights": (weights / weights.sum(axis=1, keepdims=True)).tolist(),
        "triangles": rng.integers(0, vertices, size=(8, 3)).tolist(),
        "is_mirrored": False,
    }
    correspondences = rng.integers(0, 8 if complicated else vertices, size=points).tolist()
    return {
        "theta": (rng.normal(size=26) * 0.5).tolist(),
        "us": rng.random((points, 2)).tolist() if complicated else [],
        "data": {
            "model": model,
            "correspondences": correspondences,
            "points": rng.normal(size=(points, 3)).tolist(),
        },
    }


FUNCTIONS = {
    "objective": timed(pre=Problem, post=lambda err: err.ravel().tolist())(objective),
    "jacobian": timed(pre=Problem, post=lambda J: J.tolist())(jacobian),
}
