/*
 * conv_wino_seq.h - the Winograd transforms' loops over a class sequence's
 * groups (conv_wino.c), included once per vector width. The includer
 * defines VW (groups per vector), SEQ(name) (the name of this width's
 * copy) and WIDE (the copy's target attributes), which it undefines at
 * its end; the transforms (IN_TF*,
 * OUT_TF*) are conv_wino.c's. Elementwise IEEE operations with no
 * contraction: every width gives the same bits.
 */
typedef float SEQ(vf) __attribute__((vector_size(VW * sizeof(float)), aligned(4)));
#define vf SEQ(vf)

/* u_i[j] for the np groups of one class sequence (phases zp as above) */
WIDE static void SEQ(in_seq2)(float *const zp[6], float *const u[MAX_NPT], int np) {
    const float *ze = zp[0], *zo = zp[1];
    int j = 0;
#define UV(i, J, v) (*(vf *)(u[i] + (J)) = (v))
    for (; j + VW <= np; j += VW) {
        const vf s0 = *(const vf *)(ze + j), s1 = *(const vf *)(zo + j);
        const vf s2 = *(const vf *)(ze + j + 1), s3 = *(const vf *)(zo + j + 1);
        const vf s4 = *(const vf *)(ze + j + 2), s5 = *(const vf *)(zo + j + 2);
        const vf s6 = *(const vf *)(ze + j + 3), s7 = *(const vf *)(zo + j + 3);
        IN_TF2(vf, s0, s1, s2, s3, s4, s5, s6, s7, UV, j);
    }
#define US(i, J, v) (u[i][J] = (v))
    for (; j < np; j++) {
        const float s0 = ze[j], s1 = zo[j], s2 = ze[j + 1], s3 = zo[j + 1];
        const float s4 = ze[j + 2], s5 = zo[j + 2], s6 = ze[j + 3], s7 = zo[j + 3];
        IN_TF2(float, s0, s1, s2, s3, s4, s5, s6, s7, US, j);
    }
}

WIDE static void SEQ(in_seq4)(float *const zp[6], float *const u[MAX_NPT], int np) {
    const float *z0 = zp[0], *z1 = zp[1], *z2 = zp[2], *z3 = zp[3];
    int j = 0;
    for (; j + VW <= np; j += VW) {
        const vf s0 = *(const vf *)(z0 + j), s1 = *(const vf *)(z1 + j);
        const vf s2 = *(const vf *)(z2 + j), s3 = *(const vf *)(z3 + j);
        const vf s4 = *(const vf *)(z0 + j + 1), s5 = *(const vf *)(z1 + j + 1);
        const vf s6 = *(const vf *)(z2 + j + 1), s7 = *(const vf *)(z3 + j + 1);
        const vf s8 = *(const vf *)(z0 + j + 2), s9 = *(const vf *)(z1 + j + 2);
        IN_TF4(vf, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, UV, j);
    }
    for (; j < np; j++) {
        const float s0 = z0[j], s1 = z1[j], s2 = z2[j], s3 = z3[j];
        const float s4 = z0[j + 1], s5 = z1[j + 1], s6 = z2[j + 1], s7 = z3[j + 1];
        const float s8 = z0[j + 2], s9 = z1[j + 2];
        IN_TF4(float, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, US, j);
    }
}

WIDE static void SEQ(in_seq6)(float *const zp[6], float *const u[MAX_NPT], int np) {
    const float *z0 = zp[0], *z1 = zp[1], *z2 = zp[2], *z3 = zp[3], *z4 = zp[4], *z5 = zp[5];
    int j = 0;
    for (; j + VW <= np; j += VW) {
        const vf s0 = *(const vf *)(z0 + j), s1 = *(const vf *)(z1 + j);
        const vf s2 = *(const vf *)(z2 + j), s3 = *(const vf *)(z3 + j);
        const vf s4 = *(const vf *)(z4 + j), s5 = *(const vf *)(z5 + j);
        const vf s6 = *(const vf *)(z0 + j + 1), s7 = *(const vf *)(z1 + j + 1);
        const vf s8 = *(const vf *)(z2 + j + 1), s9 = *(const vf *)(z3 + j + 1);
        const vf s10 = *(const vf *)(z4 + j + 1), s11 = *(const vf *)(z5 + j + 1);
        IN_TF6(vf, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, UV, j);
    }
    for (; j < np; j++) {
        const float s0 = z0[j], s1 = z1[j], s2 = z2[j], s3 = z3[j], s4 = z4[j], s5 = z5[j];
        const float s6 = z0[j + 1], s7 = z1[j + 1], s8 = z2[j + 1], s9 = z3[j + 1];
        const float s10 = z4[j + 1], s11 = z5[j + 1];
        IN_TF6(float, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, US, j);
    }
}

WIDE static void SEQ(in_seq42)(float *const zp[6], float *const u[MAX_NPT], int np) {
    const float *z0 = zp[0], *z1 = zp[1], *z2 = zp[2], *z3 = zp[3];
    int j = 0;
    for (; j + VW <= np; j += VW) {
        const vf s0 = *(const vf *)(z0 + j), s1 = *(const vf *)(z1 + j);
        const vf s2 = *(const vf *)(z2 + j), s3 = *(const vf *)(z3 + j);
        const vf s4 = *(const vf *)(z0 + j + 1);
        IN_TF42(vf, s0, s1, s2, s3, s4, UV, j);
    }
    for (; j < np; j++) {
        const float s0 = z0[j], s1 = z1[j], s2 = z2[j], s3 = z3[j], s4 = z0[j + 1];
        IN_TF42(float, s0, s1, s2, s3, s4, US, j);
    }
#undef UV
#undef US
}

/* yp[p][j] (outputs m = M j + p) of np groups from m_i */
WIDE static void SEQ(out_seq2)(float *const yp[6], const float *const m[MAX_NPT], float b, int np) {
    float *y0 = yp[0], *y1 = yp[1];
    int j = 0;
    for (; j + VW <= np; j += VW) {
#define L(i) (*(const vf *)(m[i] + j))
        const vf m0 = L(0), m1 = L(1), m2 = L(2), m3 = L(3), m4 = L(4), m5 = L(5), m6 = L(6),
                 m7 = L(7);
        vf a, c;
        OUT_TF2(vf, m0, m1, m2, m3, m4, m5, m6, m7, b, a, c);
        *(vf *)(y0 + j) = a;
        *(vf *)(y1 + j) = c;
    }
    for (; j < np; j++) OUT_TF2(float, m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], m[5][j],
                                m[6][j], m[7][j], b, y0[j], y1[j]);
}

WIDE static void SEQ(out_seq4)(float *const yp[6], const float *const m[MAX_NPT], float b, int np) {
    int j = 0;
    for (; j + VW <= np; j += VW) {
        const vf m0 = L(0), m1 = L(1), m2 = L(2), m3 = L(3), m4 = L(4), m5 = L(5), m6 = L(6),
                 m7 = L(7), m8 = L(8), m9 = L(9);
#undef L
        vf a0, a1, a2, a3;
        OUT_TF4(vf, m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, b, a0, a1, a2, a3);
        *(vf *)(yp[0] + j) = a0;
        *(vf *)(yp[1] + j) = a1;
        *(vf *)(yp[2] + j) = a2;
        *(vf *)(yp[3] + j) = a3;
    }
    for (; j < np; j++) OUT_TF4(float, m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], m[5][j],
                                m[6][j], m[7][j], m[8][j], m[9][j], b, yp[0][j], yp[1][j],
                                yp[2][j], yp[3][j]);
}

WIDE static void SEQ(out_seq6)(float *const yp[6], const float *const m[MAX_NPT], float b, int np) {
    int j = 0;
    for (; j + VW <= np; j += VW) {
#define L(i) (*(const vf *)(m[i] + j))
        const vf m0 = L(0), m1 = L(1), m2 = L(2), m3 = L(3), m4 = L(4), m5 = L(5), m6 = L(6),
                 m7 = L(7), m8 = L(8), m9 = L(9), m10 = L(10), m11 = L(11);
#undef L
        vf a0, a1, a2, a3, a4, a5;
        OUT_TF6(vf, m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, b, a0, a1, a2, a3, a4, a5);
        *(vf *)(yp[0] + j) = a0;
        *(vf *)(yp[1] + j) = a1;
        *(vf *)(yp[2] + j) = a2;
        *(vf *)(yp[3] + j) = a3;
        *(vf *)(yp[4] + j) = a4;
        *(vf *)(yp[5] + j) = a5;
    }
    for (; j < np; j++) OUT_TF6(float, m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], m[5][j],
                                m[6][j], m[7][j], m[8][j], m[9][j], m[10][j], m[11][j], b,
                                yp[0][j], yp[1][j], yp[2][j], yp[3][j], yp[4][j], yp[5][j]);
}

WIDE static void SEQ(out_seq42)(float *const yp[6], const float *const m[MAX_NPT], float b, int np) {
    int j = 0;
    for (; j + VW <= np; j += VW) {
#define L(i) (*(const vf *)(m[i] + j))
        const vf m0 = L(0), m1 = L(1), m2 = L(2), m3 = L(3), m4 = L(4);
#undef L
        vf a0, a1, a2, a3;
        OUT_TF42(vf, m0, m1, m2, m3, m4, b, a0, a1, a2, a3);
        *(vf *)(yp[0] + j) = a0;
        *(vf *)(yp[1] + j) = a1;
        *(vf *)(yp[2] + j) = a2;
        *(vf *)(yp[3] + j) = a3;
    }
    for (; j < np; j++) OUT_TF42(float, m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], b, yp[0][j],
                                 yp[1][j], yp[2][j], yp[3][j]);
}

#undef vf
#undef VW
#undef SEQ
#undef WIDE
