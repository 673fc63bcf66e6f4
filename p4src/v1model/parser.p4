/* Parser, checksum controls and deparser. A truncated frame ends in a parser error; the
 * ingress drops it and counts it as malformed (simple_switch does not drop on its own). */
#ifndef P4REDUCE_PARSER_P4
#define P4REDUCE_PARSER_P4
#include <core.p4>
#include <v1model.p4>
#include "values.p4"
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
        transition select(hdr.p4r.msg_type) {
            MSG_DATA: parse_values;
            MSG_SKIP: parse_values;   /* header only, or padded to its job's size */
            MSG_REWIND: parse_result; /* a SKIP's layout, or a RESULT's (a spine's) */
            MSG_ANNOUNCE: parse_fingerprint;
            MSG_RESULT: parse_result;   /* a spine's, at a leaf (uplink.p4) */
            MSG_STATUS: parse_status;
            default: accept;
        }
    }
    /* a RESULT carries the fingerprint range (an announce round's; above
     * SKIP_GROWS_TO_VALUES values per block maybe followed by a block: parse_fingerprint),
     * values (a data round's: the size its length gives) or nothing (STATE_LOST); so does
     * a silent spine's REWIND, at a leaf (a worker's has a SKIP's layout: Uplink drops one
     * with a RESULT's) */
#define FINGERPRINT_AND_VALUES_LENGTH(K) (IPV4_LEN_WITH_FINGERPRINT + 4 * K): parse_fingerprint;
    state parse_result {
        transition select(hdr.ipv4.total_len) {
            IPV4_LEN_WITH_FINGERPRINT: parse_fingerprint;
            FOR_EACH_BLOCK_SIZE(FINGERPRINT_AND_VALUES_LENGTH)
            default: parse_values;
        }
    }
    state parse_status {
        packet.extract(hdr.round_status);
        transition accept;
    }
    /* the fingerprint range, and after it a block of the size the length gives: a silent
     * job's ANNOUNCE in the leaf role above SKIP_GROWS_TO_VALUES values per block (its
     * contents ignored), so that the announce round's RESULT is as long as the leaf's
     * empty partial made from it (uplink.p4), and the answers made from it */
#define VALUES_AFTER_FINGERPRINT(K) (IPV4_LEN_WITH_FINGERPRINT + 4 * K): parse_values_##K;
    state parse_fingerprint {
        packet.extract(hdr.fingerprint);
        transition select(hdr.ipv4.total_len) {
            FOR_EACH_BLOCK_SIZE(VALUES_AFTER_FINGERPRINT)
            default: accept;
        }
    }
    /* a DATA's (or SKIP's) values header is the one of the size its length gives (IPv4
     * total length 48 + 4K); a length that is no size leaves data_values 0, which
     * Validation drops as malformed unless it is a header-only SKIP, and Admission drops
     * a size other than the job's */
    state parse_values {
#define VALUES_LENGTH(K) (IPV4_LEN_HEADER_ONLY + 4 * K): parse_values_##K;
        transition select(hdr.ipv4.total_len) {
            FOR_EACH_BLOCK_SIZE(VALUES_LENGTH)
            default: accept;
        }
    }
#define VALUES_STATE(K)                                                        \
    state parse_values_##K {                                                   \
        packet.extract(hdr.values_##K);                                        \
        meta.data_values = K;                                                  \
        transition accept;                                                     \
    }
    FOR_EACH_BLOCK_SIZE(VALUES_STATE)
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
#define VALUES_EMIT(K) packet.emit(hdr.values_##K);
        FOR_EACH_BLOCK_SIZE(VALUES_EMIT)
    }
}
#endif
