// Must be refused at load time: meters.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<32> a; }
struct headers_t { h_t h; }
struct meta_t { bit<32> x; }
parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.h); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    meter(4, MeterType.packets) mtr;
    action do_meter() { mtr.execute_meter((bit<32>)0, m.x); }
    apply { do_meter(); }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
