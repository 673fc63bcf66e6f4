// Arithmetic with bmv2 widths, signedness and wrap-around; slices, concatenation, shifts,
// casts, saturating ops, ternary. Input header 'in_t' carries operands, the program fills
// 'res_t' and sends the packet back out of port 1.
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8>  a;
    bit<8>  b;
    int<8>  sa;
    int<8>  sb;
    bit<16> x;
    bit<32> w;
    bit<4>  n;
    bit<4>  pad;
}

header res_t {
    bit<8>  add;
    bit<8>  sub;
    bit<8>  mul;
    bit<8>  neg;
    bit<8>  shl;
    bit<8>  shr;
    int<8>  sadd;
    int<8>  sshr;
    bit<8>  sat_add;
    bit<8>  sat_sub;
    int<8>  ssat_add;
    bit<8>  hi;
    bit<4>  lo;
    bit<4>  mid;
    bit<16> cat;
    bit<32> cast_up;
    bit<8>  cast_down;
    int<16> sext;
    bit<8>  tern;
    bit<8>  cmp;
    bit<8>  dynshl;
    bit<32> wide_mul;
}

struct headers_t { in_t i; res_t r; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.i); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        h.r.setValid();
        h.r.add = h.i.a + h.i.b;
        h.r.sub = h.i.a - h.i.b;
        h.r.mul = h.i.a * h.i.b;
        h.r.neg = ~h.i.a;
        h.r.shl = h.i.a << 3;
        h.r.shr = h.i.a >> 3;
        h.r.sadd = h.i.sa + h.i.sb;
        h.r.sshr = h.i.sa >> 2;
        h.r.sat_add = h.i.a |+| h.i.b;
        h.r.sat_sub = h.i.a |-| h.i.b;
        h.r.ssat_add = h.i.sa |+| h.i.sb;
        h.r.hi = h.i.x[15:8];
        h.r.lo = h.i.x[3:0];
        h.r.mid = h.i.x[9:6];
        h.r.cat = h.i.x[7:0] ++ h.i.a;
        h.r.cast_up = (bit<32>)h.i.a;
        h.r.cast_down = (bit<8>)h.i.w;
        h.r.sext = (int<16>)h.i.sa;
        h.r.tern = (h.i.a > h.i.b) ? h.i.a : h.i.b;
        h.r.cmp = (h.i.sa < h.i.sb) ? 8w1 : 8w0;
        h.r.dynshl = h.i.a << h.i.n;
        h.r.wide_mul = h.i.w * 32w3;
        sm.egress_spec = 1;
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.r); pkt.emit(h.i); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
