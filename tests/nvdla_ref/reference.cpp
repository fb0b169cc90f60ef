// Reference results from NVDLA's own C model of SDP's FP16 LUT pipeline, for the vectors in
// tests/data/nvdla_lut_fp16.npz. Built by make_vectors.py against a checkout of nvdla/hw (its
// cmod/hls headers and the two SDP Y functions, sdp_y_idx.cpp and sdp_y_inp.cpp); nothing of
// NVDLA's is kept in this repository.
//
//   reference ops   reads "name a b" lines (hex), writes "result result2" (hex): the float
//                   operations one by one
//   reference lut   reads one configuration, then FP32 samples (hex), writes per sample the
//                   chosen table, its entry, the flags, the fraction and the FP32 result
//   reference cdp   the same for CDP's FP16 LUT (cmod/hls_wrapper/cdp_hls_wrapper.cpp's
//                   HLS_CDP_lookup_lut, with the vlibs operations it calls): per sample and
//                   table the underflow, overflow and hit flags and the FP17 result
#include "sdp.h"
#include "vlibs.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

void NV_NVDLA_SDP_CORE_Y_idx(ac_channel<yDataOutStruct> &, yLutRegType, yLutRegType,
                             yLutRegIdxType, yLutRegIdxType, yLutRegIdxType, ACINTF(1), ACINTF(1),
                             ACINTF(1), ACINTF(1), ACINTF(2), ac_channel<yLutOutStruct> &);
void NV_NVDLA_SDP_CORE_Y_inp(ac_channel<yInpInStruct> &, ACINTF(2), ac_channel<yInpOutStruct> &);

static int ops() {
    char op[16];
    unsigned long long a, b;
    while (scanf("%15s %llx %llx", op, &a, &b) == 3) {
        unsigned long long r = 0, r2 = 0;
        if (!strcmp(op, "add32")) r = (uint32_t)Fp32Add((int)a, (int)b).to_int();
        else if (!strcmp(op, "sub32")) r = (uint32_t)Fp32Sub((int)a, (int)b).to_int();
        else if (!strcmp(op, "add17")) r = Fp17Add((int)a, (int)b).to_int() & 0x1ffff;
        else if (!strcmp(op, "mul17")) r = Fp17Mul((int)a, (int)b).to_int() & 0x1ffff;
        else if (!strcmp(op, "fp32_fp17")) r = Fp32ToFp17((int)a).to_int() & 0x1ffff;
        else if (!strcmp(op, "fp16_fp17")) r = Fp16ToFp17((int)(int16_t)a).to_int() & 0x1ffff;
        else if (!strcmp(op, "fp17_fp32")) r = (uint32_t)Fp17ToFp32((int)a).to_int();
        else if (!strcmp(op, "fraction")) {
            yLutFracType f = 0;
            f.set_slc(0, ac_int<35, false>(a));
            r = FpFractionToFloat<35, 6, 10>(f).to_int() & 0x1ffff;
        } else if (!strcmp(op, "index")) {
            yLutIndexTypeF i;
            yLutFracType f;
            yLutRegIdxType s = (int)(int8_t)b;
            FpFloatToIntFrac<8, 23, 8, 9, 35>((int)a, s, i, f);
            r = i.to_uint();
            r2 = f.to_uint64();
        } else {
            fprintf(stderr, "unknown operation %s\n", op);
            return 2;
        }
        printf("%llx %llx\n", r, r2);
    }
    return 0;
}

// One sample through the index stage, then what SDP's wrapper does between the two stages
// (the table reads, the slope registers, the exponential table's 2^offset), then the
// interpolation stage. Every lane carries the same sample.
static int lut() {
    int le_fn, le_off, le_sel, lo_sel, upri, opri, hpri;
    unsigned start[2], end[2], scale[4], le[65], lo[257];     // scale: LE u/o, LO u/o
    if (scanf("%d %d %d %d %d %d %d", &le_fn, &le_off, &le_sel, &lo_sel, &upri, &opri,
              &hpri) != 7)
        return 1;
    if (scanf("%x %x %x %x", &start[0], &end[0], &start[1], &end[1]) != 4) return 1;
    for (int k = 0; k < 4; k++)
        if (scanf("%x", &scale[k]) != 1) return 1;
    for (int k = 0; k < 65; k++)
        if (scanf("%x", &le[k]) != 1) return 1;
    for (int k = 0; k < 257; k++)
        if (scanf("%x", &lo[k]) != 1) return 1;
    const int fp16 = 2;
    unsigned x;
    while (scanf("%x", &x) == 1) {
        yDataOutStruct in;
        for (int i = 0; i < SPEED_Y; i++) in.data[i] = (int)x;
        ac_channel<yDataOutStruct> idx_in;
        ac_channel<yLutOutStruct> idx_out;
        idx_in.write(in);
        NV_NVDLA_SDP_CORE_Y_idx(idx_in, (int)start[0], (int)start[1], le_off, le_sel, lo_sel,
                                le_fn, upri, opri, hpri, fp16, idx_out);
        yLutOutStruct o = idx_out.read();
        int sel = o.ram_sel[0].to_int(), addr = o.ram_addr[0].to_int();
        bool under = o.uflow[0], over = o.oflow[0];
        unsigned *t = sel ? lo : le;
        yInpInStruct ip;
        for (int i = 0; i < SPEED_Y; i++) {
            ip.x[i] = o.x[0];
            ip.fraction[i] = o.fraction[0];
            ip.y0[i] = (int16_t)t[addr];
            ip.y1[i] = (under || over) ? 0 : (int16_t)t[addr + 1];
            ip.flow[i] = under || over;
            ip.bias[i] = 0;
            ip.scale[i] = 0;
            ip.shift[i] = 0;
            ip.offset[i] = 0;
            if (under && sel == 0 && le_fn == 0) {
                float two = pow(2.0, le_off);
                int32_t bits;
                memcpy(&bits, &two, 4);
                ip.bias[i] = bits;
            }
            if (under || over) {
                ip.scale[i] = (int16_t)scale[2 * sel + over];
                ip.offset[i] = (int)(over ? end[sel] : start[sel]);
            }
        }
        ac_channel<yInpInStruct> inp_in;
        ac_channel<yInpOutStruct> inp_out;
        inp_in.write(ip);
        NV_NVDLA_SDP_CORE_Y_inp(inp_in, fp16, inp_out);
        yInpOutStruct r = inp_out.read();
        printf("%x %x %x %x %x %x %llx %x\n", sel, addr, (int)under, (int)over,
               (int)o.le_hit[0], (int)o.lo_hit[0],
               (unsigned long long)o.fraction[0].to_uint64(), (uint32_t)r.data[0].to_int());
    }
    return 0;
}

void HLS_CDP_lookup_lut(vFp32Type, uint16_t, bool, bool, int16_t *, uint64_t, uint64_t, int16_t,
                        int16_t, int16_t, int8_t, bool &, bool &, bool &,
                        ac_channel<vFp17Type> &);

// Each sample (the sum of squares, FP32) through both of CDP's tables, as its wrapper looks
// them up.
static int cdp() {
    int le_fn, le_off, le_sel, lo_sel;
    unsigned start[2], end[2], scale[4], e;                    // scale: LE u/o, LO u/o
    int16_t le[65], lo[257];
    if (scanf("%d %d %d %d", &le_fn, &le_off, &le_sel, &lo_sel) != 4) return 1;
    if (scanf("%x %x %x %x", &start[0], &end[0], &start[1], &end[1]) != 4) return 1;
    for (int k = 0; k < 4; k++)
        if (scanf("%x", &scale[k]) != 1) return 1;
    for (int k = 0; k < 65; k++) {
        if (scanf("%x", &e) != 1) return 1;
        le[k] = (int16_t)e;
    }
    for (int k = 0; k < 257; k++) {
        if (scanf("%x", &e) != 1) return 1;
        lo[k] = (int16_t)e;
    }
    unsigned x;
    while (scanf("%x", &x) == 1) {
        for (int t = 0; t < 2; t++) {
            bool under, over, hit;
            ac_channel<vFp17Type> out;
            HLS_CDP_lookup_lut((int)x, t ? 256 : 64, t == 0, t == 0 && le_fn == 0, t ? lo : le,
                               start[t], end[t], (int16_t)scale[2 * t], (int16_t)scale[2 * t + 1],
                               t ? 0 : le_off, t ? lo_sel : le_sel, under, over, hit, out);
            printf("%x %x %x %x ", (int)under, (int)over, (int)hit,
                   out.read().to_int() & 0x1ffff);
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "ops")) return ops();
    if (argc == 2 && !strcmp(argv[1], "lut")) return lut();
    if (argc == 2 && !strcmp(argv[1], "cdp")) return cdp();
    fprintf(stderr, "usage: reference ops|lut|cdp\n");
    return 2;
}
