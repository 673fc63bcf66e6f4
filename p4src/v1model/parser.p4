/* Parser, checksum controls and deparser. A truncated frame ends in a parser error; the
 * ingress drops it and counts it as malformed (simple_switch does not drop on its own). */
#ifndef P4REDUCE_PARSER_P4
#define P4REDUCE_PARSER_P4
#include <core.p4>
#include <v1model.p4>
#include "../common/headers.p4"

parser P4ReduceParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* p4reduce is IPv4 without options or fragments (first fragments included); anything
         * else stops here (Validation drops it if it is addressed to the switch) */
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.flags[0:0],
                          hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w4, 4w5, 1w0, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            P4REDUCE_UDP_BASE &&& P4REDUCE_UDP_MASK: parse_p4reduce;
            default: accept;
        }
    }
    state parse_p4reduce {
        packet.extract(hdr.p4r);
        /* flags[5:5] is FLAG_PACKED: a packed-encoding job's values are one word */
        transition select(hdr.p4r.msg_type, hdr.p4r.flags[5:5]) {
            (MSG_DATA, 1w0): parse_values;
            (MSG_DATA, 1w1): parse_packed_values;
            (MSG_ANNOUNCE, _): parse_fingerprint;
            default: accept;
        }
    }
    state parse_fingerprint {
        packet.extract(hdr.fingerprint);
        transition accept;
    }
    state parse_values {
        packet.extract(hdr.values);
        transition accept;
    }
    state parse_packed_values {
        packet.extract(hdr.packed_values);
        transition accept;
    }
}

control P4ReduceVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control P4ReduceComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control P4ReduceDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.p4r);
        packet.emit(hdr.fingerprint);
        packet.emit(hdr.round_status);
        packet.emit(hdr.values);
        packet.emit(hdr.packed_values);
    }
}
#endif
