"""GradBench's ``kmeans`` eval: the k-means cost, and one Newton step's direction, the gradient
divided by the Hessian's diagonal (a Hessian-vector product with the ones, since the Hessian of this
cost is diagonal)."""

import numpy as np

import ast_ad

from .wrap import timed


def cost(points, centroids):
    """The sum over points of the squared distance to the nearest centroid."""
    distances = np.sum(points ** 2, axis=1)[None, :] + np.sum(centroids ** 2, axis=1)[:, None] \
        - 2.0 * (points @ centroids.T).T
    return np.sum(np.min(distances, axis=0))


def _input(raw):
    return np.array(raw["points"], dtype=np.float64), np.array(raw["centroids"], dtype=np.float64)


gradient_in_centroids = ast_ad.grad(cost, argnums=1)


def direction(given):
    points, centroids = given
    g, h_ones = ast_ad.jvp(
        gradient_in_centroids, (points, centroids), (None, np.ones_like(centroids))
    )
    return g / h_ones


FUNCTIONS = {
    "cost": timed(pre=_input, post=float)(lambda given: cost(*given)),
    "dir": timed(pre=_input, post=lambda d: d.tolist())(direction),
}
