// Registers (read / add / write with 32-bit wrap), indirect counters, hash() with the
// algorithms the interpreter implements, random() bounds, multicast replication with
// egress_rid / instance_type visible in egress, and egress drop.
#include <core.p4>
#include <v1model.p4>

header op_t { bit<8> idx; bit<32> v; bit<8> mgid; bit<8> drop_rid; }
header res_t {
    bit<32> acc; bit<32> crc32; bit<16> crc16; bit<16> csum; bit<32> ident;
    bit<8> rnd_ok; bit<16> rid; bit<32> itype; bit<16> eport; bit<32> plen;
}
struct headers_t { res_t r; op_t o; }
struct meta_t { bit<32> tmp; }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.o); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<32>>(16) acc;
    counter(16, CounterType.packets_and_bytes) seen;
    apply {
        h.r.setValid();
        acc.read(m.tmp, (bit<32>)h.o.idx);
        m.tmp = m.tmp + h.o.v;
        acc.write((bit<32>)h.o.idx, m.tmp);
        h.r.acc = m.tmp;
        seen.count((bit<32>)h.o.idx);
        hash(h.r.crc32, HashAlgorithm.crc32, 32w0, { h.o.idx, h.o.v }, 64w0x100000000);
        hash(h.r.crc16, HashAlgorithm.crc16, 16w0, { h.o.idx, h.o.v }, 32w65536);
        hash(h.r.csum, HashAlgorithm.csum16, 16w0, { h.o.idx, h.o.v }, 32w65536);
        hash(h.r.ident, HashAlgorithm.identity, 32w10, { h.o.v }, 32w1000);
        bit<8> rnd;
        random(rnd, 8w10, 8w20);
        h.r.rnd_ok = (rnd >= 10 && rnd <= 20) ? 8w1 : 8w0;
        if (h.o.mgid != 0) {
            sm.mcast_grp = (bit<16>)h.o.mgid;
        } else {
            sm.egress_spec = 5;
        }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        h.r.rid = sm.egress_rid;
        h.r.itype = sm.instance_type;
        h.r.eport = (bit<16>)sm.egress_port;
        h.r.plen = sm.packet_length;
        if (h.o.drop_rid != 0 && sm.egress_rid == (bit<16>)h.o.drop_rid) {
            mark_to_drop(sm);
        }
    }
}
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
