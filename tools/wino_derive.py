#!/usr/bin/env python3
"""Derives the Winograd F(6,7), F(4,7) and F(2,7) matrices of
src/kernels/conv_wino.c and checks them exactly, in rationals (standard
library only).

Toom-Cook on N - 1 points and infinity, N = M + 6: a linear convolution
s = g * h (g 7 taps, h M samples) is V^-1 [(V_7 g) . (V_M h)], V_k the
N x k evaluation matrix (rows [1, p, p^2, ...]; infinity picks the leading
coefficient). Its transpose is the correlation the conv computes,
y[i] = sum_k g[k] x[i + k], i = 0..M-1:

    y = V_M^T [(V_7 g) . (V^-T x)]   so   A^T = V_M^T, G = V_7, B^T = V^-T.

Each row of B^T is scaled to coprime integers and the scale moved into G.
F(2,7) takes the points 0, 1, -1, 2, -2, 1/2, -1/2; F(4,7) those and
3/2, -3/2 (whose powers up to 27/8 in A^T are exact in binary; of the pairs
tried in a model of the fp32 arithmetic on random data, +-3/2 and +-2/3
rounded least, 19-20 times the direct sum's rms error against 30-37 for
+-3, +-1/3, +-1/4 or +-4, and 5 for F(2,7)); F(6,7) those and 3/4, -3/4
(powers up to 243/1024, exact; with +-3/2, the pairs +-3/4 and +-2/3
rounded least, 35-39 times the direct sum's, against 38-48 for +-1/3 or
+-1/4 and 110-180 for +-3, +-4 or +-4/3; a fourth pair, F(8,7), 110 at
best). For each form the script prints the three matrices and checks the
identity on random integer data; it exits non-zero if a check fails.

    python3 tools/wino_derive.py
    python3 tools/wino_derive.py --error-model   (needs numpy)

--error-model runs each form, and F(4,7) and F(6,7) on other point pairs,
and F(8,7), in fp32
(numpy) on random weights and inputs, and prints its rms error against the
exact sum over that of the direct fp32 conv: the model behind the choice of
points. (The C kernels sum in another order; tests/unit/test_kernels_conv
measures them.)
"""
import random
import sys
from fractions import Fraction as F
from math import gcd

R = 7
POINTS2 = [F(0), F(1), F(-1), F(2), F(-2), F(1, 2), F(-1, 2)]  # and infinity
FORMS = {2: POINTS2, 4: POINTS2 + [F(3, 2), F(-3, 2)],
         6: POINTS2 + [F(3, 2), F(-3, 2), F(3, 4), F(-3, 4)]}


def vander(points, k):
    rows = [[p ** j for j in range(k)] for p in points]
    rows.append([F(0)] * (k - 1) + [F(1)])
    return rows


def transpose(a):
    return [list(r) for r in zip(*a)]


def inverse(a):
    n = len(a)
    m = [list(r) + [F(int(i == j)) for j in range(n)] for i, r in enumerate(a)]
    for c in range(n):
        p = next(r for r in range(c, n) if m[r][c] != 0)
        m[c], m[p] = m[p], m[c]
        piv = m[c][c]
        m[c] = [v / piv for v in m[c]]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c]
                m[r] = [a - f * b for a, b in zip(m[r], m[c])]
    return [r[n:] for r in m]


def lcm(a, b):
    return a * b // gcd(a, b)


def matrices(M, points):
    """A^T, G, B^T of F(M,7) on points, each row of B^T scaled to coprime
    integers and its scale moved into G (rationals)."""
    N = M + R - 1
    AT = transpose(vander(points, M))
    G = vander(points, R)
    BT = transpose(inverse(vander(points, N)))
    for i in range(N):
        den = 1
        for v in BT[i]:
            den = lcm(den, v.denominator)
        num = 0
        for v in BT[i]:
            num = gcd(num, abs((v * den).numerator))
        s = F(den, num)
        BT[i] = [v * s for v in BT[i]]
        G[i] = [v / s for v in G[i]]
    return AT, G, BT


def derive(M, points):
    N = M + R - 1
    AT, G, BT = matrices(M, points)

    def show(name, a):
        print(name)
        for r in a:
            print("  [" + ", ".join(str(v) for v in r) + "]")

    print("F(%d,7), points %s and infinity" % (M, ", ".join(str(p) for p in points)))
    show("B^T", BT)
    show("G", G)
    show("A^T", AT)

    rng = random.Random(1)
    for _ in range(200):
        g = [F(rng.randint(-50, 50)) for _ in range(R)]
        x = [F(rng.randint(-50, 50)) for _ in range(N)]
        u = [sum(BT[i][k] * x[k] for k in range(N)) for i in range(N)]
        w = [sum(G[i][k] * g[k] for k in range(R)) for i in range(N)]
        y = [sum(AT[j][i] * w[i] * u[i] for i in range(N)) for j in range(M)]
        want = [sum(g[k] * x[j + k] for k in range(R)) for j in range(M)]
        if y != want:
            print("mismatch:", y, want)
            return 1
    print("y = A^T[(G g) . (B^T x)] holds exactly on 200 random cases\n")
    return 0


def error_model():
    import numpy as np

    def run(M, points, cin, cout=64, groups=64):
        AT, G, BT = (np.array([[float(v) for v in r] for r in a]) for a in matrices(M, points))
        N, npos = M + R - 1, groups * M
        rng = np.random.default_rng(0)
        w = (rng.standard_normal((cout, cin, R)) / np.sqrt(cin * R)).astype(np.float32)
        x = rng.standard_normal((cin, npos + R - 1)).astype(np.float32)
        exact = sum(w[:, :, k].astype(np.float64) @ x[:, k:k + npos].astype(np.float64)
                    for k in range(R))
        direct = np.zeros((cout, npos), np.float32)
        for k in range(R):
            direct += w[:, :, k] @ x[:, k:k + npos]
        W = np.einsum("nk,oik->noi", G, w.astype(np.float64)).astype(np.float32)
        s = x[:, np.arange(groups)[:, None] * M + np.arange(N)[None, :]]   # [cin, groups, N]
        u = np.einsum("nj,cgj->ncg", BT.astype(np.float32), s).astype(np.float32)
        m = np.stack([W[i] @ u[i] for i in range(N)])                     # [N, cout, groups]
        y = np.zeros((cout, groups, M), np.float32)
        for i in range(M):
            for n in range(N):
                y[:, :, i] += np.float32(AT[i, n]) * m[n]
        rms = lambda a: np.sqrt(np.mean(a ** 2))
        return rms(y.reshape(cout, npos) - exact) / rms(direct - exact)

    cases = [("F(2,7)", 2, POINTS2), ("F(4,7) +-3/2", 4, FORMS[4]),
             ("F(6,7) +-3/2 +-3/4", 6, FORMS[6])]
    others = (("+-2/3", F(2, 3)), ("+-3", F(3)), ("+-1/3", F(1, 3)), ("+-1/4", F(1, 4)),
              ("+-4", F(4)))
    for name, pair in others:
        cases.append(("F(4,7) " + name, 4, POINTS2 + [pair, -pair]))
    for name, pair in others + (("+-4/3", F(4, 3)),):
        cases.append(("F(6,7) +-3/2 " + name, 6, FORMS[4] + [pair, -pair]))
    for name, pair in (("+-1/3", F(1, 3)), ("+-1/4", F(1, 4)), ("+-2/3", F(2, 3))):
        cases.append(("F(8,7) +-3/4 " + name, 8, FORMS[6] + [pair, -pair]))
    for cin in (96, 768):
        for name, M, points in cases:
            print("cin %3d  %-22s rms error / direct conv's %.1f" % (cin, name, run(M, points, cin)))
    return 0


def main():
    if sys.argv[1:] == ["--error-model"]:
        return error_model()
    return max(derive(M, points) for M, points in FORMS.items())


if __name__ == "__main__":
    sys.exit(main())
