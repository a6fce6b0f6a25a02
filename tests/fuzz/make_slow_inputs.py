#!/usr/bin/env python3
"""Inputs that made the loader take seconds (quadratic paths), generated rather than stored:
each is 0.3-0.7 MB. All are valid protobuf; a correct loader answers each in milliseconds.

    make_slow_inputs.py --out DIR [--replay MB_FUZZ_REPLAY]

writes DIR/slow-*.onnx and, with --replay, runs the replayer on DIR (it fails a load over
1 s) and exits with its status. ctest runs it as `fuzz_replay_slow` (see replay.cmake).
Standard library only."""
import argparse
import itertools
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from protowire import field, varint  # noqa: E402


def vfield(num, value):  # varint field
    return varint(num << 3) + varint(value)


def node(op, inputs=(), outputs=(), attrs=()):
    return (b"".join(field(1, i) for i in inputs) + b"".join(field(2, o) for o in outputs) +
            field(4, op) + b"".join(field(5, a) for a in attrs))


def graph(nodes=(), inputs=(), name="g"):
    return (b"".join(field(1, n) for n in nodes) + field(2, name) +
            b"".join(field(11, field(1, i)) for i in inputs))


def model(graph_bytes):
    return vfield(1, 8) + field(7, graph_bytes) + field(8, vfield(2, 17))


def nested_captures(names=300, depth=32):
    """Subgraphs 32 deep, each reading the same outer names: graph.c resolved every capture by
    scanning every value of every enclosing graph, once per enclosing level (D^3 x N^2)."""
    names = ["%x" % i for i in range(names)]
    g = None
    for level in range(depth, 0, -1):
        nodes = [node("Sum", names, ["s%d" % level])]
        if g is not None:
            nodes.append(node("If", names[:1], ["o%d" % level],
                              [field(1, "then_branch") + vfield(20, 5) + field(6, g)]))
        g = graph(nodes, name="b%d" % level)
    main = graph([node("If", names[:1], ["o"], [field(1, "then_branch") + vfield(20, 5) + field(6, g)])],
                 inputs=names)
    return model(main)


def wide_captures(n=40000):
    """One subgraph capturing 40k outer names: the same scan, N^2."""
    names = ["%x" % i for i in range(n)]
    sub = graph([node("Sum", names, ["s"])], name="b")
    return model(graph([node("If", names[:1], ["o"], [field(1, "then_branch") + vfield(20, 5) + field(6, sub)])],
                       inputs=names))


def distinct_op_types(n=60000):
    """60k nodes with distinct op types: the info summary's op histogram searched linearly."""
    return model(graph([node("%x" % i) for i in range(n)]))


def repeated_graph_field(n=120000):
    """ModelProto.graph 120k times: protobuf-c merges a repeated singular message by copying
    the accumulated arrays each time (N^2)."""
    return vfield(1, 8) + field(7, field(1, b"")) * n + field(8, vfield(2, 17))


# 4-character blocks: every block of a row maps the same FNV-1a state (mod 2^17) to the same
# state, so all names made of one block per row hash to one slot of any table up to 2^17
# entries (found by brute force over 64^4 blocks per row).
BLOCKS = [
    """
    _Ta1 j6f1 u8o1 c0Q1 nZV1 lh.1 2o42 .kd2 Fqz2 JUJ2 DsR2 yTE3 9_H3 GZp4 AhX4 6FF5 1z86
    cHd6 Ob.6 Pjn7 Rxv7 4TD7 Zc68 .sr8 2WB8 JML8 Ow09 97b9 yL_9 A.ia LXna RNFa 4FXa il6b
    Urpb WtXb nH6c _Fmc wXwc uN_c eEwd v3Vd Wi2e S5be kOhe rGQe AFLf GdTf 0zng pusg 6TFg
    vkKg n83h XSnj BKpj ZQFj Mgdk 7ozk OALk IcTk Anbl Dx2m 6Llm pmym vCQm qJpn xHOn Lpho
    dzro RvPo c73p Zipp BSFp 1ehq Oivq M_Nq 5aXq EG.q 9V8r p5dr y70s kgFs z29t x0Qt Nzzu
    HTRu 8y4v R4kx _8zx E0Xx RLdy Wv6z Chpz j2jA Dw6B ZWdB BInB yX9C MeFC 7iTC UNFD 2v2E
    Jl8E vAwE qHVF 8l0G LrzG HNJG lc4H BQhH 7AnI 5gvI k1sJ y52K S_nK QaFK iwXK x23L _hnL
    wrpL YZFL qPHL 4pjM NxHM HVPM q8UO yE7P 0TaP 26IP n13Q gUZQ Wp4R CjNR JD6S Db.S i5cT
    HE.T S9fU kClU WeVU sC5V 3ZBV maMV xA7W bUEW hZoX jhGX ln0Y j0xY 2i6Z XWjZ .mFZ FsLZ
    DqTZ 4jb_ Lll_ Rzt_ fdN_ Xgv. TcF. rsT. VA..
    """.split(),
    """
    m_X0 o571 kYg1 f1n1 SSy1 X3F1 p9L1 m7_1 7nk2 OTq2 ArI2 j2d4 R8j4 g2u4 P.B4 ePM4 MFS4
    PFM5 8hW5 DA56 hdz6 vFR6 pJ28 6wo8 Z279 KVV9 I4.9 f52a Gmga _kma igSa 7rob ukJb sERb
    3N_b x5zc u3Ic Y01d TV6d MJwd cjyd IvGd 1lMd axQd R4.d 8lse .tUe p06f 6Acf vJnf hxVf
    tLug kH7h ZFlh rXvh I0bi XHCi W6Zi qB1j elkj mNRk vRhl h8_m 2Ecn Join dsWn NcYn WC3o
    9Kao yBno Hgep JAMp LcUp k80q ydfq 9mmq Ri3r V5cr nOir wGPr _QIs Q7Qs 5zot uurt 3TGt
    skJt xSju s3Uu D.hv IXov WNGv 1FYv DFKw BdSw ngGx f70y kC9y _isy GSEy Ax3z 3Lmz umxz
    sCPz XNaA W4hA Z8yA MTSB enYB jx3C Rv9C 8zgC PpQC vTZD 4eiF JiwF 2GAF H_OF 0aYF 9ECG
    HeGH 2iUH JC_H ojfI yfDI 9oSI Rk1J V7AJ OQ1K CuaK GIQK 3RiL s1sM l7BM Y9UM WLeN hc8O
    BfmO DDuO nYaP V_oP TaGP lwYP ic7Q GQkQ EssQ 7v3R Ol9R sAvR YQCS eHET MNKT .hqU PNEU
    o2kV r2zV tHQW OD7X 5TbY 76JY 1pkZ KxIZ MVQZ Ib5. jJR.
    """.split(),
    """
    pJa0 rdI0 ZJS0 EJg1 cZq1 Gx_1 vHc2 nbm2 6wn2 lDu2 4qv2 RUq5 iwa6 Ycu6 wSG6 _MM6 uQ_6
    HqE7 fES7 ye18 5Fk9 FR0a U49a QXia .H.a Bvmb tbOb lxYb 4uZb 3A2c kV3c grCc R1jd P_rd
    1S0e ZQ3g dggg TsKg Ga7h yiUh M38i D3ai qWhi YMvi F5Ii s5Pi Mk5j 3V8j iI_j bKmk 5hfl
    meil oGql 7zNl 1dVl XbBm SDnn KRpn E4Hn p0Yn yz1o .EFp DITp wgbq D1Cq YOPq qIZq iK1r
    f1cs bMSs 1f4t 5jDt mgGt oE_t KPrv SJxv IRJv Gl1w B6Zw tJex g2Jx x6Ux US0y gjmy atuy
    FG6z PGdz 8qjz mMzA UZ2B Q6bB WHJB 1bhD oysD AvDD T80E A.KE dT1F G8FF p2OF yx3G 9q8G
    K4eG cBkG 2S4H jF7H tFaH 4YlH 6oDH hx_H apYI u9EL _UWL bauM HiSM msaN oQyN 7dzN XLvO
    A6MO jX5P nteP vboP 4_rP tDGP UQ6Q arKQ glSQ WS.Q FE4R PyBR 8sXR J9wS kC1T _SuT C7ET
    f_gU HguU dIOU yO9V 7bdV o_kV 1LLV 2H0W jK1W Z4LW XJTW pHGX W87Y cXsY EtAY lzwZ vJEZ
    4wHZ 6qPZ nl_Z HOc_ daI_ fGQ_ wUe. Yak. iuG. siU. 3bX. kw_.
    """.split(),
]


def fnv1a(s):
    h = 1469598103934665603
    for c in s.encode():
        h = ((h ^ c) * 1099511628211) & ((1 << 64) - 1)
    return h


def hash_flood():
    """40k tensor names that collide in the low 17 bits of unseeded FNV-1a: every insert into
    the name map probed the whole cluster (N^2 strcmp)."""
    names = ["".join(p) for p in itertools.islice(itertools.product(*BLOCKS), 40000)]
    assert len({fnv1a(n) & 0x1FFFF for n in names}) == 1
    return model(graph([node("Split", ["x"], names)], inputs=["x"]))


def opset_imports_per_node(n=30000):
    """30k opset_import entries (the default domain last) and a chain of 30k nodes: every
    node's opset was found by a linear scan of the imports, at load (op resolution) and in
    shape inference (N x M strcmp)."""
    names = ["v%x" % i for i in range(n + 1)]
    nodes = [node("Abs", [names[i]], [names[i + 1]]) for i in range(n)]
    g = (b"".join(field(1, x) for x in nodes) + field(2, "g") +
         field(11, field(1, names[0]) + field(2, field(1, vfield(1, 1) + field(2, field(1, vfield(1, 2)))))))
    imports = field(8, field(1, "x") + vfield(2, 1)) * n + field(8, vfield(2, 17))
    return vfield(1, 8) + field(7, g) + imports


INPUTS = {
    "slow-nested-subgraph-captures": nested_captures,
    "slow-wide-subgraph-captures": wide_captures,
    "slow-info-distinct-op-types": distinct_op_types,
    "slow-protobuf-merge-repeated-graph": repeated_graph_field,
    "slow-strmap-hash-flood": hash_flood,
    "slow-opset-imports-per-node": opset_imports_per_node,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory to write slow-*.onnx into")
    ap.add_argument("--replay", help="mb_fuzz_replay binary to run on the directory")
    ap.add_argument("--slow-ms", default="1000",
                    help="fail a load slower than this (0: no time limit, as ctest runs it)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in INPUTS.items():
        data = make()
        assert len(data) < 1 << 20, (name, len(data))
        with open(os.path.join(args.out, name + ".onnx"), "wb") as f:
            f.write(data)
    if args.replay:
        return subprocess.call([args.replay, f"--slow-ms={args.slow_ms}", args.out])
    return 0


if __name__ == "__main__":
    sys.exit(main())
