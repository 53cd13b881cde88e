#!/usr/bin/env python3
"""Derives the Winograd F(2,7) matrices of src/kernels/conv_wino.c and checks
them exactly, in rationals (standard library only).

Toom-Cook on the points 0, 1, -1, 2, -2, 1/2, -1/2 and infinity: a linear
convolution s = g * h (g 7 taps, h 2 samples) is V^-1 [(V_7 g) . (V_2 h)],
V_k the 8 x k evaluation matrix (rows [1, p, p^2, ...]; infinity picks the
leading coefficient). Its transpose is the correlation the conv computes,
y[i] = sum_k g[k] x[i + k], i = 0, 1:

    y = V_2^T [(V_7 g) . (V^-T x)]   so   A^T = V_2^T, G = V_7, B^T = V^-T.

Each row of B^T is scaled to coprime integers and the scale moved into G.
The script prints the three matrices and checks the identity on random
integer data; it exits non-zero if the check fails.

    python3 tools/wino_f27.py
"""
import random
import sys
from fractions import Fraction as F
from math import gcd

M, R = 2, 7
N = M + R - 1
POINTS = [F(0), F(1), F(-1), F(2), F(-2), F(1, 2), F(-1, 2)]  # and infinity


def vander(k):
    rows = [[p ** j for j in range(k)] for p in POINTS]
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


def main():
    AT = transpose(vander(M))
    G = vander(R)
    BT = transpose(inverse(vander(N)))
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

    def show(name, a):
        print(name)
        for r in a:
            print("  [" + ", ".join(str(v) for v in r) + "]")

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
    print("y = A^T[(G g) . (B^T x)] holds exactly on 200 random cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
