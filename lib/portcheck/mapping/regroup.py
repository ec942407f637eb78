"""The same values with axes split and reordered: an output one side returns head-split, [batch, heads, seq, head
size] (paddlenlp's BigBird Linear3D), that the other returns [batch, seq, hidden] (a Linear), and a parameter one
side holds [hidden, heads, head size] (transformers' XLNet q) that the other holds [hidden, hidden].

An output is the other's when a row-major reshape splitting its axes into factors, then a transpose, gives the
other's shape; where several do (two axes of one size), the one keeping the axes nearest their order (fewest
pairs swapped) is the rule, not the one the values favour (they settle only between splits alike in that): a port
splitting its heads the wrong way round ([seq, head size, heads]) is red at its module, not matched by another
split. A parameter is the other's when it is
the same values in row-major order with adjacent axes merged (no transpose: a layout's rule says one).

May import numpy and the standard library."""
import itertools

import numpy as np

MAX_AXES = 6  # the permutations of the finer shape's axes tried: 720 at most


def _squeezed(s) -> tuple:
    return tuple(int(d) for d in s if d != 1)


def _splits(x: tuple, c: tuple) -> bool:
    """c is x with each axis split into consecutive factors (no axis of 1 on either side)."""
    i = 0
    for d in x:
        prod = 1
        while prod < d and i < len(c):
            prod, i = prod * c[i], i + 1
        if prod != d:
            return False
    return i == len(c)


def _inversions(p) -> int:
    return sum(a > b for a, b in itertools.combinations(p, 2))


def _ways(x: tuple, y: tuple) -> list:
    """[(inversions, c, p)]: x.reshape(c) transposed by argsort(p) is y (y the finer, axes of 1 left out)."""
    if len(y) <= len(x) or len(y) > MAX_AXES or int(np.prod(x)) != int(np.prod(y)):
        return []
    out = []
    for p in itertools.permutations(range(len(y))):
        c = tuple(y[k] for k in p)
        if _splits(x, c):
            out.append((_inversions(p), c, p))
    return sorted(out)


def regrouped(x, y) -> bool:
    """Two shapes of one output whose values are each other's with axes split and reordered (not a plain reshape
    keeping the last axis, nor an axis order alone: pairing's own rules)."""
    x, y = _squeezed(x), _squeezed(y)
    return len(x) != len(y) and bool(_ways(x, y) or _ways(y, x))


def as_other(value, shape, near=None):
    """value in `shape`'s layout by the rule (the split of fewest pairs swapped; between such splits alike in that,
    the one ten times nearer `near`'s values, else the first), or None where no split and reorder makes it."""
    value = np.asarray(value)
    x, y = _squeezed(value.shape), _squeezed(shape)
    if len(y) > len(x):
        ways = [(n, (lambda v, c=c, p=p: np.transpose(v.reshape(c), np.argsort(p)))) for n, c, p in _ways(x, y)]
    else:
        ways = [(n, (lambda v, p=p: np.transpose(v.reshape(x), p))) for n, c, p in _ways(y, x)]
    if not ways:
        return None
    best = [to for n, to in ways if n == ways[0][0]]
    moved = [to(value.reshape(x)).reshape(shape) for to in best]
    if len(moved) > 1 and near is not None and np.shape(near) == tuple(shape):
        far = sorted((float(np.max(np.abs(m.astype(np.float64) - near))) if m.size else 0.0, i)
                     for i, m in enumerate(moved))
        if far[0][0] * 10 < far[1][0]:
            return moved[far[0][1]]
    return moved[0]


def merged(x, y) -> bool:
    """Two shapes of one parameter holding the same values in row-major order: each run of adjacent axes of one
    side is a single axis of the other ([hidden, heads, head size] against [hidden, heads * head size])."""
    x, y = _squeezed(x), _squeezed(y)
    if x == y or not x or not y or int(np.prod(x)) != int(np.prod(y)):
        return False
    i = j = 0
    while i < len(x) and j < len(y):
        a, b, ni, nj = x[i], y[j], 1, 1
        while a != b:
            if a < b:
                a, ni = a * x[i + ni], ni + 1
            else:
                b, nj = b * y[j + nj], nj + 1
        if ni > 1 and nj > 1:  # a run of axes on both sides: a reshape no merge says
            return False
        i, j = i + ni, j + nj
    return True


def merges(fine: tuple, coarse: tuple) -> bool:
    """Layout-free shapes (each one's sizes sorted, as pairing holds them): `fine`'s sizes grouped so that each
    group's product is one of `coarse`'s sizes ([4, 8, 32] against [32, 32]): what merged() can be, orders unknown."""
    fine, coarse = sorted(_squeezed(fine)), sorted(_squeezed(coarse))
    if len(fine) < len(coarse) or int(np.prod(fine)) != int(np.prod(coarse)):
        return False

    def place(left, targets):
        if not targets:
            return not left
        target, rest = targets[0], targets[1:]
        for n in range(1, len(left) + 1):
            for group in set(itertools.combinations(left, n)):
                if int(np.prod(group)) == target:
                    others = list(left)
                    for g in group:
                        others.remove(g)
                    if place(others, rest):
                        return True
        return False
    return len(fine) <= MAX_AXES and place(fine, coarse)


def tensors_fit(mine: tuple, theirs: tuple) -> bool:
    """Two modules' layout-free tensor shapes, one to one, each the other's or merges() of it either way."""
    if len(mine) != len(theirs):
        return False
    left = list(theirs)
    for s in mine:
        fit = next((t for t in left if t == s), None) or next(
            (t for t in left if merges(s, t) or merges(t, s)), None)
        if fit is None:
            return False
        left.remove(fit)
    return True
