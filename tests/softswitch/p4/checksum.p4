// verify_checksum / update_checksum (csum16) on IPv4 and update_checksum_with_payload on UDP;
// checksum_error is reported in the IPv4 diffserv field, TTL is decremented.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src; bit<32> dst;
}
header udp_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> checksum; }

struct headers_t { eth_t eth; ipv4_t ipv4; udp_t udp; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.etype) { 0x0800: ip; default: accept; }
    }
    state ip {
        pkt.extract(h.ipv4);
        transition select(h.ipv4.protocol) { 17: udp; default: accept; }
    }
    state udp { pkt.extract(h.udp); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) {
    apply {
        verify_checksum(h.ipv4.isValid(),
            { h.ipv4.version, h.ipv4.ihl, h.ipv4.diffserv, h.ipv4.total_len,
              h.ipv4.identification, h.ipv4.flags, h.ipv4.frag_offset, h.ipv4.ttl,
              h.ipv4.protocol, h.ipv4.src, h.ipv4.dst },
            h.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (h.ipv4.isValid()) {
            h.ipv4.ttl = h.ipv4.ttl - 1;
            h.ipv4.diffserv = (bit<8>)sm.checksum_error;
        }
        sm.egress_spec = 3;
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) {
    apply {
        update_checksum(h.ipv4.isValid(),
            { h.ipv4.version, h.ipv4.ihl, h.ipv4.diffserv, h.ipv4.total_len,
              h.ipv4.identification, h.ipv4.flags, h.ipv4.frag_offset, h.ipv4.ttl,
              h.ipv4.protocol, h.ipv4.src, h.ipv4.dst },
            h.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(h.udp.isValid(),
            { h.ipv4.src, h.ipv4.dst, 8w0, h.ipv4.protocol, h.udp.len,
              h.udp.sport, h.udp.dport, h.udp.len },
            h.udp.checksum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
